package mcpadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// errRecorder wraps a real backend and records the error of each run.
type errRecorder struct {
	invoker.Invoker
	errs chan error
}

// Capabilities forwards the backend's, so that the tools get its schema.
func (r *errRecorder) Capabilities() invoker.Capabilities {
	c := r.Invoker.Capabilities()
	return c
}

func (r *errRecorder) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	res, err := r.Invoker.Invoke(ctx, req)
	r.errs <- err
	return res, err
}

// TestSchemaFieldsAcceptedByBackends checks the tools' schemas against the
// real backends, both ways: every field a tool's input schema offers must
// be accepted by the backend, and every field it accepts must be offered. The backend's binary is missing, so a request
// the backend accepts fails with invoker.ErrNotInstalled (Invoke checks the
// request and builds the command before it looks for the binary), while a
// field it cannot take fails with invoker.ErrUnsupported.
func TestSchemaFieldsAcceptedByBackends(t *testing.T) {
	const sessionID = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shot.png"), []byte("\x89PNG\r\n\x1a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// values gives the test values of an optional property; a property
	// missing here fails the test, so that a new one gets checked too.
	values := map[string][]any{
		"permission":     {"read-only", "workspace-write", "unlimited"},
		"model":          {"some-model"},
		"session_id":     {sessionID},
		"fork":           {false}, // true needs a session_id: TestForkArgument
		"system_prompt":  {"Answer briefly."},
		"images":         {[]string{"shot.png"}},
		"output_schema":  {map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
		"max_turns":      {3},
		"max_budget_usd": {0.25},
	}
	parallelValues := map[string]any{
		"workdir":       dir,
		"permission":    "workspace-write",
		"model":         "some-model",
		"system_prompt": "Answer briefly.",
		"max_parallel":  2,
		"fail_fast":     false,
	}

	for _, newInvoker := range []func(...invoker.Options) invoker.Invoker{codex.New, gemini.New, claude.New} {
		inv := &errRecorder{
			Invoker: newInvoker(invoker.Options{Binary: filepath.Join(t.TempDir(), "missing")}),
			errs:    make(chan error, 100),
		}
		name := inv.Name()
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, &mcpadapter.Options{MaxPermission: invoker.Unlimited}, inv)
			res, err := h.cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatalf("ListTools() error = %v", err)
			}
			type schema struct {
				Properties map[string]struct {
					Items *schema `json:"items"`
				} `json:"properties"`
			}
			schemas := map[string]*schema{}
			for _, tl := range res.Tools {
				s := new(schema)
				remarshal(t, tl.InputSchema, s)
				schemas[tl.Name] = s
			}

			// check calls tool with arguments and wants every run the
			// call makes to fail only for the missing binary.
			check := func(tool string, arguments map[string]any, runs int, what string) {
				t.Helper()
				var out any
				h.call(context.Background(), t, tool, arguments, &out)
				if got := len(inv.errs); got != runs {
					t.Errorf("%s with %s: the backend ran %d times, want %d; output %v", tool, what, got, runs, out)
				}
				for range len(inv.errs) {
					if err := <-inv.errs; !errors.Is(err, invoker.ErrNotInstalled) {
						t.Errorf("%s with %s: Invoke() error = %v, want invoker.ErrNotInstalled (the field accepted)", tool, what, err)
					}
				}
			}

			single := schemas[name]
			if single == nil {
				t.Fatalf("no tool %q", name)
			}
			for p := range single.Properties {
				if p == "prompt" || p == "workdir" {
					continue
				}
				vals, ok := values[p]
				if !ok {
					t.Errorf("%s offers %q, which this test has no value for: add one", name, p)
				}
				for _, v := range vals {
					check(name, args("hi", dir, p, v), 1, p+"="+toJSON(t, v))
				}
			}

			// The other way: a field the backend accepts must be offered.
			for field, set := range map[string]func(*invoker.Request){
				"model":          func(r *invoker.Request) { r.Model = "some-model" },
				"session_id":     func(r *invoker.Request) { r.SessionID = sessionID },
				"fork":           func(r *invoker.Request) { r.SessionID, r.Fork = sessionID, true },
				"system_prompt":  func(r *invoker.Request) { r.SystemPrompt = "Answer briefly." },
				"images":         func(r *invoker.Request) { r.Images = []string{filepath.Join(dir, "shot.png")} },
				"output_schema":  func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"type":"object"}`) },
				"max_turns":      func(r *invoker.Request) { r.MaxTurns = 3 },
				"max_budget_usd": func(r *invoker.Request) { r.MaxBudgetUSD = 0.25 },
			} {
				req := invoker.Request{Prompt: "hi", Workdir: dir}
				set(&req)
				_, err := inv.Invoker.Invoke(context.Background(), req)
				_, offered := single.Properties[field]
				if accepted := !errors.Is(err, invoker.ErrUnsupported); accepted != offered {
					t.Errorf("%s: backend accepts %s = %v (Invoke() error = %v), schema offers it = %v", name, field, accepted, err, offered)
				}
			}

			parallel := schemas[name+mcpadapter.ParallelSuffix]
			if parallel == nil {
				t.Fatalf("no tool %q", name+mcpadapter.ParallelSuffix)
			}
			call := map[string]any{}
			for p := range parallel.Properties {
				if p == "tasks" {
					continue
				}
				v, ok := parallelValues[p]
				if !ok {
					t.Errorf("%s offers %q, which this test has no value for: add one", name+mcpadapter.ParallelSuffix, p)
					continue
				}
				call[p] = v
			}
			var tasks []map[string]any
			task := parallel.Properties["tasks"].Items
			for p := range task.Properties {
				if p == "prompt" {
					continue
				}
				var v any = dir
				if p != "workdir" {
					vals, ok := values[p]
					if !ok {
						t.Errorf("%s offers %q in a task, which this test has no value for: add one", name+mcpadapter.ParallelSuffix, p)
						continue
					}
					v = vals[len(vals)-1]
				}
				tasks = append(tasks, map[string]any{"prompt": "task " + p, p: v})
			}
			call["tasks"] = tasks
			keys := slices.Sorted(maps.Keys(call))
			check(name+mcpadapter.ParallelSuffix, call, len(tasks), toJSON(t, keys)+" and one task per field")
		})
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
