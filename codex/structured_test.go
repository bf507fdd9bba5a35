package codex

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

const nameSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// schemaArg returns the file named by --output-schema in args, and its
// position relative to "resume" (-1 when absent).
func schemaArg(args []string) (file string, afterResume bool) {
	resume := slices.Index(args, "resume")
	for i, a := range args {
		if f, ok := strings.CutPrefix(a, "--output-schema="); ok {
			return f, resume >= 0 && i > resume
		}
	}
	return "", false
}

// The schema goes to codex in a file of the run's own, passed with
// --output-schema (after "resume" when resuming, where exec resume takes
// it), and removed by Cleanup.
func TestCommandOutputSchema(t *testing.T) {
	for _, sid := range []string{"", "01a1fc5c-838c-7a43-9661-c8ed22a94191"} {
		req := invoker.Request{Prompt: "x", Workdir: "/w", SessionID: sid, OutputSchema: json.RawMessage(nameSchema)}
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		file, afterResume := schemaArg(cmd.Args)
		if file == "" || afterResume != (sid != "") {
			t.Fatalf("args %q: want --output-schema=FILE (after resume: %v)", cmd.Args, sid != "")
		}
		if cmd.Args[len(cmd.Args)-1] != "-" || slices.Index(cmd.Args, "--") < slices.Index(cmd.Args, "--output-schema="+file) {
			t.Errorf("args %q: want the schema option before -- and the prompt on stdin", cmd.Args)
		}
		b, err := os.ReadFile(file)
		if err != nil || string(b) != nameSchema {
			t.Errorf("schema file holds %q (%v), want the schema", b, err)
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("schema file mode = %v, want 0600", fi.Mode().Perm())
		}
		if cmd.Cleanup == nil {
			t.Fatal("Command.Cleanup is nil, want it to remove the schema file")
		}
		cmd.Cleanup()
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("schema file after Cleanup: %v, want it removed", err)
		}
	}
	req := invoker.Request{Prompt: "x", Workdir: "/w"}
	if cmd, err := (backend{}).Command(&req); err != nil || cmd.Cleanup != nil {
		t.Errorf("Command() without a schema: Cleanup %v, %v; want nil, nil", cmd.Cleanup != nil, err)
	}
	// A request refused by Command leaves no file behind.
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "clinvoke-codex-schema-*"))
	req = invoker.Request{Prompt: "x", Workdir: "/w", Images: []string{"/a,b.png"}, OutputSchema: json.RawMessage(nameSchema)}
	if _, err := (backend{}).Command(&req); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Fatalf("Command() error = %v, want ErrInvalidRequest", err)
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "clinvoke-codex-schema-*")); len(after) > len(before) {
		t.Errorf("schema files %q after a refused request, want none new", after)
	}
}

// Codex does not check its answer against the schema (captured:
// output-schema-mismatch): the engine does, and the file is gone when
// Invoke returns. The fake agent fails, as codex does, when the file it is
// given does not hold JSON, so a success also shows the file was there.
func TestInvokeOutputSchema(t *testing.T) {
	for _, tt := range []struct {
		name, answer string
		wantErr      bool
	}{
		{"matches", `{"name":"Ada"}`, false},
		{"not JSON", "not json at all", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: tt.answer, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
			inv := New(invoker.Options{Binary: os.Args[0]})
			res, err := inv.Invoke(context.Background(), invoker.Request{
				Prompt: "name someone", Workdir: t.TempDir(), Env: s.Env(), OutputSchema: json.RawMessage(nameSchema),
			})
			if alive := fakeagent.Survivors(s.Tag); len(alive) > 0 {
				t.Errorf("processes alive after Invoke returned: %v", alive)
			}
			rec, rerr := fakeagent.ReadRecord(s.RecordDir)
			if rerr != nil {
				t.Fatal(rerr)
			}
			file, _ := schemaArg(rec.Args)
			if file == "" {
				t.Fatalf("codex args %q: no --output-schema", rec.Args)
			}
			if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("schema file %s after Invoke: %v, want it removed", file, err)
			}
			var se *invoker.SchemaError
			switch {
			case !tt.wantErr && (err != nil || string(res.Structured) != tt.answer):
				t.Errorf("Invoke() = Structured %s, %v; want %s, nil", res.Structured, err, tt.answer)
			case tt.wantErr && (!errors.As(err, &se) || se.Text != tt.answer || res.Text != tt.answer || res.Structured != nil):
				t.Errorf("Invoke() = {Text %q Structured %s}, %v; want the text kept and a *SchemaError", res.Text, res.Structured, err)
			}
		})
	}
}

func TestUnsupportedLimits(t *testing.T) {
	dir := t.TempDir()
	inv := New(invoker.Options{Binary: filepath.Join(dir, "missing")})
	for field, set := range map[string]func(*invoker.Request){
		"MaxTurns":     func(r *invoker.Request) { r.MaxTurns = 2 },
		"MaxBudgetUSD": func(r *invoker.Request) { r.MaxBudgetUSD = 1 },
	} {
		req := invoker.Request{Prompt: "x", Workdir: dir}
		set(&req)
		res, err := inv.Invoke(context.Background(), req)
		if !errors.Is(err, invoker.ErrUnsupported) || !strings.Contains(err.Error(), "Request."+field) || !strings.Contains(err.Error(), "deadline") {
			t.Errorf("Invoke() with %s: error = %v, want ErrUnsupported naming the field and the way out", field, err)
		}
		if res.ExitCode != -1 {
			t.Errorf("Invoke() with %s: ExitCode = %d, want -1 (nothing started)", field, res.ExitCode)
		}
	}
}
