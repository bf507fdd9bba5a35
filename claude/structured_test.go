package claude

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

const nameSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// A schema too long for one argument is refused before anything starts.
func TestCommandSchemaTooLong(t *testing.T) {
	long := `{"description":"` + strings.Repeat("x", 128<<10) + `"}`
	req := invoker.Request{Prompt: "x", Workdir: "/w", OutputSchema: json.RawMessage(long)}
	if _, err := (backend{}).Command(&req); !errors.Is(err, invoker.ErrInvalidRequest) || !strings.Contains(err.Error(), "Request.OutputSchema") {
		t.Errorf("Command() error = %v, want ErrInvalidRequest naming Request.OutputSchema", err)
	}
}

// invokeFake runs the claude backend on the fake agent (Claude flavour),
// which answers the structured-answer and limit flags as Claude Code 2.1.197
// does, and checks that nothing of the run survives.
func invokeFake(t *testing.T, s fakeagent.Script, req invoker.Request) (*invoker.Result, error) {
	t.Helper()
	s.Flavor, s.Tag = fakeagent.Claude, fakeagent.NewTag()
	req.Prompt, req.Workdir, req.Env = "name someone", t.TempDir(), s.Env()
	res, err := New(invoker.Options{Binary: os.Args[0]}).Invoke(context.Background(), req)
	if alive := fakeagent.Survivors(s.Tag); len(alive) > 0 {
		t.Errorf("processes alive after Invoke returned: %v", alive)
	}
	return res, err
}

func TestInvokeStructured(t *testing.T) {
	schema := json.RawMessage(nameSchema)
	t.Run("StructuredOutput", func(t *testing.T) {
		res, err := invokeFake(t, fakeagent.Script{Answer: `{"name":"Ada"}`}, invoker.Request{OutputSchema: schema})
		if err != nil || string(res.Structured) != `{"name":"Ada"}` || res.Turns != 2 || res.Usage.CostUSD <= 0 {
			t.Errorf("Invoke() = {Structured %s Turns %d Cost %v}, %v; want the answer, 2 turns, a cost, nil", res.Structured, res.Turns, res.Usage.CostUSD, err)
		}
	})
	t.Run("text matching the schema", func(t *testing.T) {
		// The capture where Claude Code gave up on StructuredOutput and
		// reported the model's text: it fits the schema all the same.
		res, err := invokeFake(t, fakeagent.Script{Replay: "testdata/json-schema-text.stdout", Interval: 1}, invoker.Request{OutputSchema: schema})
		if err != nil || string(res.Structured) != `{"name":"Ada"}` || res.Turns != 2 {
			t.Errorf("Invoke() = Structured %s, %v; want the text checked and kept", res.Structured, err)
		}
	})
	t.Run("text not JSON", func(t *testing.T) {
		res, err := invokeFake(t, fakeagent.Script{Answer: "Ada"}, invoker.Request{OutputSchema: schema})
		var se *invoker.SchemaError
		if !errors.As(err, &se) || se.Text != "Ada" || res.Text != "Ada" || res.Structured != nil {
			t.Errorf("Invoke() = {Text %q Structured %s}, %v; want a *SchemaError keeping the text", res.Text, res.Structured, err)
		}
	})
}

func TestInvokeLimits(t *testing.T) {
	for _, tt := range []struct {
		name     string
		req      invoker.Request
		sentinel error
		limit    error
		turns    int
	}{
		{"max turns", invoker.Request{MaxTurns: 1}, invoker.ErrMaxTurns, invoker.ErrMaxTurns, 2},
		{"max budget", invoker.Request{MaxBudgetUSD: 0.000001}, invoker.ErrMaxBudget, invoker.ErrMaxBudget, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := invokeFake(t, fakeagent.Script{Tool: true, SessionID: "s-limit"}, tt.req)
			var le *invoker.LimitError
			if !errors.Is(err, tt.sentinel) || !errors.As(err, &le) || le.Limit != tt.limit || le.SessionID != "s-limit" {
				t.Fatalf("Invoke() error = %v, want a *LimitError %v for session s-limit", err, tt.limit)
			}
			var se *invoker.StreamError
			if !errors.As(err, &se) || res.ExitCode != 1 {
				t.Errorf("LimitError does not unwrap to the CLI's *StreamError with exit status 1: %v", err)
			}
			if res.SessionID != "s-limit" || res.ExitCode != 1 || res.Turns != tt.turns || res.Usage.CostUSD <= 0 {
				t.Errorf("Result = {SessionID %q ExitCode %d Turns %d Cost %v}, want s-limit, 1, %d, a cost", res.SessionID, res.ExitCode, res.Turns, res.Usage.CostUSD, tt.turns)
			}
		})
	}
}
