package gemini

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
)

func TestBackendNames(t *testing.T) {
	b := backend{}
	if b.Name() != "gemini" || b.Binary() != "gemini" || b.InstallHint() != "npm install -g @google/gemini-cli" {
		t.Errorf("Name, Binary, InstallHint = %q, %q, %q", b.Name(), b.Binary(), b.InstallHint())
	}
	if New().Name() != "gemini" {
		t.Errorf("New().Name() = %q", New().Name())
	}
}

func TestCommand(t *testing.T) {
	base := invoker.Request{Prompt: "say hi", Workdir: "/work/p"}
	with := func(f func(r *invoker.Request)) invoker.Request {
		r := base
		f(&r)
		return r
	}
	tests := []struct {
		name string
		req  invoker.Request
		want []string
	}{
		{"defaults are read-only", base,
			[]string{"--output-format=stream-json", "--approval-mode=default", "--prompt="}},
		{"read-only", with(func(r *invoker.Request) { r.Permission = invoker.ReadOnly }),
			[]string{"--output-format=stream-json", "--approval-mode=default", "--prompt="}},
		{"workspace-write", with(func(r *invoker.Request) { r.Permission = invoker.WorkspaceWrite }),
			[]string{"--output-format=stream-json", "--approval-mode=auto_edit", "--admin-policy=POLICY", "--prompt="}},
		{"unlimited", with(func(r *invoker.Request) { r.Permission = invoker.Unlimited }),
			[]string{"--output-format=stream-json", "--approval-mode=yolo", "--prompt="}},
		{"model and extra args", with(func(r *invoker.Request) {
			r.Model = "gemini-2.5-pro"
			r.ExtraArgs = []string{"--skip-trust"}
		}), []string{"--output-format=stream-json", "--approval-mode=default", "--model=gemini-2.5-pro", "--skip-trust", "--prompt="}},
		{"resume keeps read-only", with(func(r *invoker.Request) { r.SessionID = "5e59c07d-7065-4197-ac62-4056d87dfa14" }),
			[]string{"--output-format=stream-json", "--approval-mode=default", "--resume=5e59c07d-7065-4197-ac62-4056d87dfa14", "--prompt="}},
		{"resume restates yolo", with(func(r *invoker.Request) {
			r.SessionID = "-S"
			r.Permission = invoker.Unlimited
			r.Model = "m"
		}), []string{"--output-format=stream-json", "--approval-mode=yolo", "--model=m", "--resume=-S", "--prompt="}},
		{"resume restates auto_edit", with(func(r *invoker.Request) {
			r.SessionID = "S"
			r.Permission = invoker.WorkspaceWrite
		}), []string{"--output-format=stream-json", "--approval-mode=auto_edit", "--resume=S", "--admin-policy=POLICY", "--prompt="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := backend{}.Command(&tt.req)
			if err != nil {
				t.Fatalf("Command() error = %v", err)
			}
			if cmd.Cleanup != nil {
				defer cmd.Cleanup()
			}
			args := slices.Clone(cmd.Args)
			for i, a := range args {
				// The policy file's name is random (policy_test.go).
				if strings.HasPrefix(a, "--admin-policy=") {
					args[i] = "--admin-policy=POLICY"
				}
			}
			if !slices.Equal(args, tt.want) {
				t.Errorf("Args =\n  %q\nwant\n  %q", cmd.Args, tt.want)
			}
			if cmd.Stdin != tt.req.Prompt {
				t.Errorf("Stdin = %q, want the prompt", cmd.Stdin)
			}
		})
	}
}

func TestPromptNeverAFlag(t *testing.T) {
	for _, p := range []string{"--help", "-p", "--prompt=x", "--yolo", "-", "@/etc/passwd"} {
		req := invoker.Request{Prompt: p, Workdir: "/w"}
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Stdin != p {
			t.Errorf("Stdin = %q, want %q", cmd.Stdin, p)
		}
		neutral := req
		neutral.Prompt = "hello"
		ncmd, _ := backend{}.Command(&neutral)
		if !slices.Equal(cmd.Args, ncmd.Args) {
			t.Errorf("prompt %q changed argv to %q", p, cmd.Args)
		}
		if cmd.Args[len(cmd.Args)-1] != "--prompt=" {
			t.Errorf("Args = %q, want the empty --prompt= last", cmd.Args)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		req  invoker.Request
		want error
	}{
		{"unknown permission", invoker.Request{Prompt: "x", Permission: "admin"}, invoker.ErrInvalidRequest},
		{"prompt over gemini's stdin limit", invoker.Request{Prompt: strings.Repeat("a", maxStdin+1)}, invoker.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := backend{}.Command(&tt.req)
			if !errors.Is(err, tt.want) {
				t.Errorf("Command() error = %v, want %v", err, tt.want)
			}
			if errors.Is(tt.want, invoker.ErrUnsupported) && !errors.Is(err, invoker.ErrInvalidRequest) {
				t.Errorf("Command() error = %v, want it to match ErrInvalidRequest too", err)
			}
		})
	}
	// 8 Mi code units of 3-byte runes are 24 MiB of UTF-8 but fit.
	big := invoker.Request{Prompt: strings.Repeat("€", maxStdin)}
	if _, err := (backend{}).Command(&big); err != nil {
		t.Errorf("Command(8 Mi code units) error = %v, want nil", err)
	}
}

func TestFlagsExist(t *testing.T) {
	help, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	req := invoker.Request{Prompt: "x", Workdir: "/w", Model: "m", SessionID: "S"}
	cmd, err := backend{}.Command(&req)
	if err != nil {
		t.Fatal(err)
	}
	flagRE := regexp.MustCompile(`^--[a-z-]+`)
	for _, a := range cmd.Args {
		if f := flagRE.FindString(a); f != "" && !regexp.MustCompile(`(?m)\s`+regexp.QuoteMeta(f)+`\s`).Match(help) {
			t.Errorf("flag %s is not in gemini --help", f)
		}
	}
}

// TestUnsupportedFields checks that the fields the CLI lacks are refused by
// Invoke before anything starts, naming the field and what to do instead.
func TestUnsupportedFields(t *testing.T) {
	agenttest.CheckUnsupported(t, New, map[string]string{
		"Images":       "@path",
		"SystemPrompt": "GEMINI_SYSTEM_MD",
		// gemini 0.61.0 has no flag for these (docs/structured-output.md).
		"OutputSchema": "no output-schema flag",
		"MaxTurns":     "model.maxSessionTurns",
		"MaxBudgetUSD": "no budget limit",
	})
}
