package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// limitsBackend is testBackend declaring the structured-answer and limit
// capabilities, with a Cleanup hook on its Command.
type limitsBackend struct {
	testBackend
	cleanup func()
}

func (limitsBackend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, OutputSchema: true, MaxTurns: true, MaxBudget: true}
}

func (b limitsBackend) Command(req *invoker.Request) (*driver.Command, error) {
	cmd, err := b.testBackend.Command(req)
	if err == nil {
		cmd.Cleanup = b.cleanup
	}
	return cmd, err
}

const nameSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// A schema that is not JSON Schema, and limits out of range, are refused
// before anything starts, naming the field.
func TestStructuredBadInputStartsNothing(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		edit    func(*invoker.Request)
		wantMsg string
	}{
		{"schema not JSON", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"type":`) }, "Request.OutputSchema is not a valid JSON Schema"},
		{"schema not an object", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`["object"]`) }, "Request.OutputSchema must be a JSON Schema object"},
		{"schema true", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`true`) }, "Request.OutputSchema must be a JSON Schema object"},
		{"schema with a bad type", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"type":"objekt"}`) }, "Request.OutputSchema is not a valid JSON Schema"},
		{"schema with a wrong keyword value", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"required":"name"}`) }, "Request.OutputSchema is not a valid JSON Schema"},
		{"schema with a dangling ref", func(r *invoker.Request) { r.OutputSchema = json.RawMessage(`{"$ref":"#/$defs/missing"}`) }, "Request.OutputSchema is not a valid JSON Schema"},
		{"negative turns", func(r *invoker.Request) { r.MaxTurns = -1 }, "Request.MaxTurns is -1"},
		{"negative budget", func(r *invoker.Request) { r.MaxBudgetUSD = -0.5 }, "Request.MaxBudgetUSD is -0.5"},
		{"NaN budget", func(r *invoker.Request) { r.MaxBudgetUSD = math.NaN() }, "Request.MaxBudgetUSD is NaN"},
		{"infinite budget", func(r *invoker.Request) { r.MaxBudgetUSD = math.Inf(1) }, "Request.MaxBudgetUSD is +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := t.TempDir()
			s := fakeagent.Script{RecordDir: rec}
			var cleanups atomic.Int32
			inv := driver.New(limitsBackend{cleanup: func() { cleanups.Add(1) }}, invoker.Options{Binary: os.Args[0]})
			req := invoker.Request{Prompt: "hi", Workdir: dir, Env: s.Env()}
			tt.edit(&req)
			res, err := inv.Invoke(context.Background(), req)
			if !errors.Is(err, invoker.ErrInvalidRequest) {
				t.Fatalf("Invoke() error = %v, want ErrInvalidRequest", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Invoke() error = %q, want it to say %q", err, tt.wantMsg)
			}
			if res == nil || res.ExitCode != -1 {
				t.Errorf("Result = %+v, want non-nil with ExitCode -1", res)
			}
			if entries, _ := os.ReadDir(rec); len(entries) > 0 {
				t.Errorf("a process started for a bad request: record dir holds %d files", len(entries))
			}
			if n := cleanups.Load(); n != 0 {
				t.Errorf("Cleanup called %d times, want 0: Command was never asked for", n)
			}
		})
	}
}

// A backend that does not declare the capabilities refuses the fields
// with ErrUnsupported naming each, before anything starts.
func TestStructuredUnsupported(t *testing.T) {
	dir := t.TempDir()
	for field, edit := range map[string]func(*invoker.Request){
		"OutputSchema": func(r *invoker.Request) { r.OutputSchema = json.RawMessage(nameSchema) },
		"MaxTurns":     func(r *invoker.Request) { r.MaxTurns = 3 },
		"MaxBudgetUSD": func(r *invoker.Request) { r.MaxBudgetUSD = 0.25 },
	} {
		t.Run(field, func(t *testing.T) {
			rec := t.TempDir()
			s := fakeagent.Script{RecordDir: rec}
			inv := driver.New(testBackend{}, invoker.Options{Binary: os.Args[0]})
			req := invoker.Request{Prompt: "hi", Workdir: dir, Env: s.Env()}
			edit(&req)
			_, err := inv.Invoke(context.Background(), req)
			if !errors.Is(err, invoker.ErrUnsupported) || !strings.Contains(err.Error(), "Request."+field) {
				t.Fatalf("Invoke() error = %v, want ErrUnsupported naming Request.%s", err, field)
			}
			if entries, _ := os.ReadDir(rec); len(entries) > 0 {
				t.Errorf("a process started for an unsupported field")
			}
		})
	}
}

// The answer of a successful turn is checked against the schema: a
// matching one is Result.Structured; text that is not JSON, or JSON that
// breaks the schema, is a *SchemaError keeping the text, like Codex's
// unchecked answers (docs/structured-output.md).
func TestStructuredAnswerChecked(t *testing.T) {
	tests := []struct {
		name, answer   string
		wantStructured string
		wantErr        string
	}{
		{"matches", ` {"name": "Ada"} `, `{"name":"Ada"}`, ""},
		{"not JSON", "not json at all", "", "the answer is not JSON"},
		{"breaks the schema", `{"nom":"Ada"}`, "", "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cleanups atomic.Int32
			f := newFixture(t, fakeagent.Script{SessionID: "thread-s", Answer: tt.answer})
			f.inv = driver.New(limitsBackend{cleanup: func() { cleanups.Add(1) }}, invoker.Options{Binary: os.Args[0]})
			f.req.OutputSchema = json.RawMessage(nameSchema)
			res, err := f.inv.Invoke(context.Background(), f.req)
			f.assertReaped(1)
			if n := cleanups.Load(); n != 1 {
				t.Errorf("Cleanup called %d times, want once", n)
			}
			if res.SessionID != "thread-s" || res.Text != tt.answer || res.ExitCode != 0 {
				t.Errorf("Result = {SessionID:%q Text:%q ExitCode:%d}, want the completed turn", res.SessionID, res.Text, res.ExitCode)
			}
			if string(res.Structured) != tt.wantStructured {
				t.Errorf("Result.Structured = %s, want %s", res.Structured, tt.wantStructured)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Invoke() error = %v, want nil", err)
				}
				return
			}
			var se *invoker.SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Invoke() error = %v, want a *SchemaError", err)
			}
			if se.Text != tt.answer || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("SchemaError = {Text:%q} %q, want the answer as text and a message about %q", se.Text, err, tt.wantErr)
			}
		})
	}
}

// Without OutputSchema, an answer is never checked and Structured stays
// nil.
func TestStructuredNotAskedFor(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Answer: `{"name":"Ada"}`})
	f.inv = driver.New(limitsBackend{}, invoker.Options{Binary: os.Args[0]})
	res, err := f.inv.Invoke(context.Background(), f.req)
	f.assertReaped(1)
	if err != nil || res.Structured != nil {
		t.Errorf("Invoke() = Structured %s, %v; want nil, nil", res.Structured, err)
	}
}

// Command.Cleanup runs once the tree is gone, and also when nothing starts
// after Command (here: the binary is missing).
func TestCommandCleanup(t *testing.T) {
	t.Run("after the run", func(t *testing.T) {
		f := newFixture(t, fakeagent.Script{Answer: "done", Grandchild: true})
		var aliveAtCleanup []int
		calls := 0
		f.inv = driver.New(limitsBackend{cleanup: func() {
			calls++
			aliveAtCleanup = f.record().Alive()
		}}, invoker.Options{Binary: os.Args[0]})
		if _, err := f.inv.Invoke(context.Background(), f.req); err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		f.assertReaped(2)
		if calls != 1 {
			t.Errorf("Cleanup called %d times, want once", calls)
		}
		if len(aliveAtCleanup) > 0 {
			t.Errorf("processes alive when Cleanup ran: %v, want it called after the tree is reaped", aliveAtCleanup)
		}
	})
	t.Run("nothing started", func(t *testing.T) {
		calls := 0
		inv := driver.New(limitsBackend{cleanup: func() { calls++ }}, invoker.Options{Binary: t.TempDir() + "/no-such-cli"})
		_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir()})
		if !errors.Is(err, invoker.ErrNotInstalled) {
			t.Fatalf("Invoke() error = %v, want ErrNotInstalled", err)
		}
		if calls != 1 {
			t.Errorf("Cleanup called %d times, want once", calls)
		}
	})
}

func TestLimitError(t *testing.T) {
	cause := &invoker.StreamError{Message: "Reached maximum number of turns (1)", Type: "error_max_turns"}
	err := fmt.Errorf("claude: %w", &invoker.LimitError{Limit: invoker.ErrMaxTurns, SessionID: "s-1", Err: cause})
	if !errors.Is(err, invoker.ErrMaxTurns) || errors.Is(err, invoker.ErrMaxBudget) {
		t.Errorf("errors.Is(%v): want ErrMaxTurns only", err)
	}
	var se *invoker.StreamError
	if !errors.As(err, &se) || se != cause {
		t.Errorf("errors.As(%v, *StreamError) = %v, want the CLI's report", err, se)
	}
	if msg := err.Error(); !strings.Contains(msg, "Request.MaxTurns") || !strings.Contains(msg, "s-1") || !strings.Contains(msg, cause.Message) {
		t.Errorf("Error() = %q, want the field, the session id and the CLI's message", msg)
	}
	budget := &invoker.LimitError{Limit: invoker.ErrMaxBudget}
	if !errors.Is(budget, invoker.ErrMaxBudget) || errors.Is(budget, invoker.ErrMaxTurns) {
		t.Errorf("errors.Is(%v): want ErrMaxBudget only", budget)
	}
}
