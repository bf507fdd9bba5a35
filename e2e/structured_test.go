//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// Structured answers, turn limits and cost with the real CLIs
// (docs/structured-output.md): the fake model answers in the shape each
// CLI asks for, and the library returns it as checked JSON.

const nameSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`

// rigFor returns a rig for the CLI named name.
func rigFor(t *testing.T, name string) *rig {
	t.Helper()
	return newRig(t, cliNamed(name))
}

// shapeTurn is how the fake model answers {"name":"Ada"} to each CLI: Codex
// asks for a JSON text (a strict json_schema response format), Claude Code
// for a call of its StructuredOutput tool.
func shapeTurn(cli string) fakemodel.Turn {
	if cli == "claude" {
		return fakemodel.CallTool("StructuredOutput", map[string]any{"name": "Ada"})
	}
	return fakemodel.Answer(`{"name":"Ada"}`)
}

func TestStructuredAnswer(t *testing.T) {
	for _, name := range []string{"codex", "claude"} {
		t.Run(name, func(t *testing.T) {
			// The codex backend writes the schema to a file under
			// TMPDIR; a directory of the test's own shows it removed
			// (and that it was there: codex fails without it).
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			r := rigFor(t, name)
			r.srv.Enqueue(shapeTurn(name))
			req := r.request("Name a famous programmer.")
			req.OutputSchema = json.RawMessage(nameSchema)
			res, err := r.invoke(context.Background(), req)
			if err != nil {
				t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
			}
			var got struct{ Name string }
			if !json.Valid(res.Structured) || json.Unmarshal(res.Structured, &got) != nil || got.Name != "Ada" {
				t.Errorf("Result.Structured = %q, want valid JSON {\"name\":\"Ada\"}; result %s", res.Structured, jsonString(res))
			}
			// The CLI really sent the schema to the model.
			scripted := r.srv.Scripted()
			if len(scripted) != 1 || !scripted[0].Contains(`"required":["name"]`) {
				t.Errorf("the CLI asked the model %d times, want once with the schema", len(scripted))
			}
			if name == "codex" && !scripted[0].Contains(`"codex_output_schema"`) {
				t.Errorf("codex did not send the schema as its response format")
			}
			if name == "claude" && (res.Turns < 1 || res.Usage.CostUSD <= 0) {
				t.Errorf("Result.Turns = %d, Usage.CostUSD = %v; want claude's num_turns and total_cost_usd", res.Turns, res.Usage.CostUSD)
			}
			// (Claude Code keeps a claude-N directory of its own there.)
			if left, _ := filepath.Glob(filepath.Join(tmp, "clinvoke-*")); len(left) > 0 {
				t.Errorf("files of the library left in TMPDIR after the run: %q", left)
			}
		})
	}
}

// Codex does not check its answer against the schema: the library does,
// and keeps the text.
func TestStructuredAnswerMismatch(t *testing.T) {
	r := rigFor(t, "codex")
	r.srv.Enqueue(fakemodel.Answer("not json at all"))
	req := r.request("Name a famous programmer.")
	req.OutputSchema = json.RawMessage(nameSchema)
	res, err := r.invoke(context.Background(), req)
	var se *invoker.SchemaError
	if !errors.As(err, &se) || se.Text != "not json at all" {
		t.Fatalf("Invoke() error = %v, want a *SchemaError keeping the text; result %s", err, jsonString(res))
	}
	if res.Text != "not json at all" || res.Structured != nil || res.SessionID == "" || res.ExitCode != 0 {
		t.Errorf("Result = %s, want the completed turn's text and session, no structured answer", jsonString(res))
	}
}

// A structured answer reaches an MCP client as JSON in the tool result's
// structured content.
func TestStructuredAnswerOverMCP(t *testing.T) {
	for _, name := range []string{"codex", "claude"} {
		t.Run(name, func(t *testing.T) {
			r := rigFor(t, name)
			r.srv.Enqueue(shapeTurn(name))
			server := mcp.NewServer(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil)
			tools, err := mcpadapter.Register(server, nil, r.inv)
			if err != nil {
				t.Fatal(err)
			}
			ct, st := mcp.NewInMemoryTransports()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			t.Cleanup(func() { // last: the call's run must have ended
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := tools.Shutdown(ctx); err != nil {
					t.Errorf("Shutdown() error = %v", err)
				}
			})
			ss, err := server.Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := ss.Wait(); err != nil {
					t.Errorf("ServerSession.Wait() error = %v", err)
				}
			})
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := cs.Close(); err != nil {
					t.Errorf("ClientSession.Close() error = %v", err)
				}
			})
			arguments := map[string]any{"prompt": "Name a famous programmer.", "workdir": r.workdir,
				"output_schema": json.RawMessage(nameSchema)}
			if r.cli.model != "" {
				arguments["model"] = r.cli.model
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: arguments})
			if err != nil {
				t.Fatalf("CallTool() error = %v", err)
			}
			if ps := r.survivors(); len(ps) > 0 {
				t.Errorf("processes of the run alive after the call returned:\n%s", strings.Join(ps, "\n"))
			}
			b, _ := json.Marshal(res.StructuredContent)
			var out struct {
				Status     mcpadapter.Status `json:"status"`
				Structured json.RawMessage   `json:"structured_output"`
			}
			if err := json.Unmarshal(b, &out); err != nil || res.IsError || out.Status != mcpadapter.StatusCompleted {
				t.Fatalf("CallTool() = IsError %v, structured content %s (%v); want a completed run", res.IsError, b, err)
			}
			if string(out.Structured) != `{"name":"Ada"}` {
				t.Errorf("structured_output = %s, want the JSON object {\"name\":\"Ada\"}", out.Structured)
			}
		})
	}
}

// Claude Code stops at --max-turns: the typed error, with the session id
// to resume and the cost so far.
func TestMaxTurnsReached(t *testing.T) {
	r := rigFor(t, "claude")
	r.srv.Enqueue(fakemodel.Shell("echo hi"), fakemodel.Answer("never reached"))
	req := r.request("Run echo hi, then answer.")
	req.Permission = r.cli.shell
	req.MaxTurns = 1
	res, err := r.invoke(context.Background(), req)
	var le *invoker.LimitError
	if !errors.Is(err, invoker.ErrMaxTurns) || !errors.As(err, &le) {
		t.Fatalf("Invoke() error = %v, want a *LimitError matching ErrMaxTurns; result %s", err, jsonString(res))
	}
	if le.SessionID == "" || res.SessionID != le.SessionID {
		t.Errorf("LimitError.SessionID = %q, Result.SessionID = %q; want the session kept in both", le.SessionID, res.SessionID)
	}
	if res.Turns < 2 || res.Usage.CostUSD <= 0 {
		t.Errorf("Result.Turns = %d, Usage.CostUSD = %v; want the turns taken and the cost so far", res.Turns, res.Usage.CostUSD)
	}
	if n := len(r.srv.Scripted()); n != 1 {
		t.Errorf("the CLI asked the model %d times, want 1 (the answer's turn is over the limit)", n)
	}
}

// Claude Code stops at --max-budget-usd after the response that crossed
// it.
func TestMaxBudgetReached(t *testing.T) {
	r := rigFor(t, "claude")
	r.srv.Enqueue(fakemodel.Shell("echo hi"), fakemodel.Answer("never reached"))
	req := r.request("Run echo hi, then answer.")
	req.Permission = r.cli.shell
	req.MaxBudgetUSD = 0.000001
	res, err := r.invoke(context.Background(), req)
	var le *invoker.LimitError
	if !errors.Is(err, invoker.ErrMaxBudget) || !errors.As(err, &le) || le.SessionID == "" {
		t.Fatalf("Invoke() error = %v, want a *LimitError matching ErrMaxBudget with the session; result %s", err, jsonString(res))
	}
	if res.Usage.CostUSD <= req.MaxBudgetUSD {
		t.Errorf("Usage.CostUSD = %v, want what was spent, above the budget %v", res.Usage.CostUSD, req.MaxBudgetUSD)
	}
}

// Claude Code's cost and turns reach the Result of a plain answer.
func TestClaudeCost(t *testing.T) {
	r := rigFor(t, "claude")
	r.srv.Enqueue(fakemodel.Answer("hi there"))
	res, err := r.invoke(context.Background(), r.request("say hi"))
	if err != nil {
		t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
	}
	if res.Usage.CostUSD <= 0 || res.Turns != 1 {
		t.Errorf("Usage.CostUSD = %v, Turns = %d; want claude's total_cost_usd and num_turns 1", res.Usage.CostUSD, res.Turns)
	}
}

// Gemini has no flag for any of them: refused before anything starts,
// naming the field.
func TestGeminiRefusesSchemaAndLimits(t *testing.T) {
	r := rigFor(t, "gemini")
	for field, set := range map[string]func(*invoker.Request){
		"OutputSchema": func(q *invoker.Request) { q.OutputSchema = json.RawMessage(nameSchema) },
		"MaxTurns":     func(q *invoker.Request) { q.MaxTurns = 1 },
		"MaxBudgetUSD": func(q *invoker.Request) { q.MaxBudgetUSD = 1 },
	} {
		req := r.request("say hi")
		set(&req)
		res, err := r.invoke(context.Background(), req)
		if !errors.Is(err, invoker.ErrUnsupported) || !strings.Contains(err.Error(), "Request."+field) || res.ExitCode != -1 {
			t.Errorf("Invoke() with %s: %v, exit %d; want ErrUnsupported naming the field, nothing started", field, err, res.ExitCode)
		}
	}
	if n := len(r.srv.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want none", n)
	}
}

// exec resume takes --output-schema too (after "resume", where the codex
// backend puts it): a resumed turn answers in the shape.
func TestStructuredAnswerOnResume(t *testing.T) {
	r := rigFor(t, "codex")
	r.srv.Enqueue(fakemodel.Answer("first answer"), fakemodel.Answer(`{"name":"Ada"}`))
	first, err := r.invoke(context.Background(), r.request("say hi"))
	if err != nil {
		t.Fatalf("first Invoke() error = %v; stderr tail:\n%s", err, first.Stderr)
	}
	req := r.request("Name a famous programmer.")
	req.SessionID = first.SessionID
	req.OutputSchema = json.RawMessage(nameSchema)
	res, err := r.invoke(context.Background(), req)
	if err != nil {
		t.Fatalf("resumed Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
	}
	if string(res.Structured) != `{"name":"Ada"}` || res.SessionID != first.SessionID {
		t.Errorf("resumed Result = %s, want the structured answer in session %s", jsonString(res), first.SessionID)
	}
	if s := r.srv.Scripted(); len(s) != 2 || s[0].Contains("codex_output_schema") || !s[1].Contains("codex_output_schema") {
		t.Errorf("want the schema sent with the resumed turn only (%d model requests)", len(s))
	}
}
