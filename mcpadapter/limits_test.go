package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

var limitCaps = invoker.Capabilities{OutputSchema: true, MaxTurns: true, MaxBudget: true}

// inputProps returns the input schema's properties of tool, with their
// maximum where they have one.
func inputProps(t *testing.T, h *harness, tool string) map[string]*float64 {
	t.Helper()
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools() error = %v", err)
	}
	for _, tl := range res.Tools {
		if tl.Name != tool {
			continue
		}
		var in struct {
			Properties map[string]struct {
				Maximum *float64 `json:"maximum"`
			} `json:"properties"`
		}
		remarshal(t, tl.InputSchema, &in)
		props := map[string]*float64{}
		for k, v := range in.Properties {
			props[k] = v.Maximum
		}
		return props
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

// The inputs are offered exactly where the invoker declares them, with the
// server's ceilings as maxima.
func TestLimitInputsOffered(t *testing.T) {
	none := capStub{answer("codex"), invoker.Capabilities{Model: true}}
	all := capStub{answer("claude"), limitCaps}
	h := newHarness(t, &mcpadapter.Options{MaxBudgetUSD: 0.5, MaxTurns: 8}, none, all)
	for _, in := range []string{"output_schema", "max_turns", "max_budget_usd"} {
		if _, ok := inputProps(t, h, "codex")[in]; ok {
			t.Errorf("codex (not declaring it) offers %s", in)
		}
		if _, ok := inputProps(t, h, "claude")[in]; !ok {
			t.Errorf("claude (declaring it) does not offer %s", in)
		}
	}
	props := inputProps(t, h, "claude")
	if m := props["max_budget_usd"]; m == nil || *m != 0.5 {
		t.Errorf("max_budget_usd maximum = %v, want the server's 0.5", m)
	}
	if m := props["max_turns"]; m == nil || *m != 8 {
		t.Errorf("max_turns maximum = %v, want the server's 8", m)
	}
}

// A structured answer is returned in the structured content as JSON, not
// as a string.
func TestStructuredOutputReturned(t *testing.T) {
	inv := capStub{&stub{name: "claude", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		return &invoker.Result{SessionID: "s-1", Text: `{"name":"Ada"}`, Structured: json.RawMessage(`{"name":"Ada"}`), Turns: 2,
			Usage: invoker.Usage{CostUSD: 0.0002}}, nil
	}}, limitCaps}
	h := newHarness(t, nil, inv)
	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
	var out struct {
		Structured map[string]any `json:"structured_output"`
		Turns      int            `json:"turns"`
		Usage      invoker.Usage  `json:"usage"`
	}
	res := h.call(context.Background(), t, "claude", args("name someone", t.TempDir(), "output_schema", schema), &out)
	if res.IsError || out.Structured["name"] != "Ada" || out.Turns != 2 || out.Usage.CostUSD != 0.0002 {
		t.Errorf("result IsError %v, structured_output %v, turns %d, cost %v; want {name: Ada}, 2, 0.0002", res.IsError, out.Structured, out.Turns, out.Usage.CostUSD)
	}
	if got := string(inv.lastRequest(t).OutputSchema); got != toJSON(t, schema) {
		t.Errorf("Request.OutputSchema = %s, want %s", got, toJSON(t, schema))
	}
}

// The server's ceilings refuse a call asking for more, and bound a call
// asking for nothing, only where the CLI supports the limit.
func TestLimitCeilings(t *testing.T) {
	claudeLike := capStub{answer("claude"), limitCaps}
	codexLike := capStub{answer("codex"), invoker.Capabilities{OutputSchema: true}}
	h := newHarness(t, &mcpadapter.Options{MaxBudgetUSD: 0.5, MaxTurns: 8}, claudeLike, codexLike)
	dir := t.TempDir()

	for _, a := range []map[string]any{args("hi", dir, "max_budget_usd", 2), args("hi", dir, "max_turns", 9)} {
		res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "claude", Arguments: a})
		if err == nil && !res.IsError {
			t.Errorf("call %v above the ceiling: accepted, want refused", a)
		}
	}
	if n := claudeLike.calls.Load(); n != 0 {
		t.Errorf("the invoker ran %d times for calls above the ceilings, want 0", n)
	}

	h.call(context.Background(), t, "claude", args("hi", dir), nil)
	if req := claudeLike.lastRequest(t); req.MaxBudgetUSD != 0.5 || req.MaxTurns != 8 {
		t.Errorf("call giving no limit: Request.MaxBudgetUSD %v, MaxTurns %d; want the server's 0.5, 8", req.MaxBudgetUSD, req.MaxTurns)
	}
	h.call(context.Background(), t, "claude", args("hi", dir, "max_budget_usd", 0.1, "max_turns", 2), nil)
	if req := claudeLike.lastRequest(t); req.MaxBudgetUSD != 0.1 || req.MaxTurns != 2 {
		t.Errorf("call within the ceilings: Request.MaxBudgetUSD %v, MaxTurns %d; want 0.1, 2", req.MaxBudgetUSD, req.MaxTurns)
	}
	// A CLI without budgets or turn limits gets neither (it would refuse
	// the request), whatever the server's ceilings.
	if res := h.call(context.Background(), t, "codex", args("hi", dir), nil); res.IsError {
		t.Fatalf("codex call: IsError, content %v", res.Content)
	}
	if req := codexLike.lastRequest(t); req.MaxBudgetUSD != 0 || req.MaxTurns != 0 {
		t.Errorf("codex call: Request.MaxBudgetUSD %v, MaxTurns %d; want 0, 0", req.MaxBudgetUSD, req.MaxTurns)
	}
}

// A run stopped by a limit is a failed, isError result that keeps the
// session id and says how to resume.
func TestLimitReachedResult(t *testing.T) {
	inv := capStub{&stub{name: "claude", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		return &invoker.Result{SessionID: "s-lim", ExitCode: 1, Turns: 2, Usage: invoker.Usage{CostUSD: 0.0002}},
			fmt.Errorf("claude: %w", &invoker.LimitError{Limit: invoker.ErrMaxTurns, SessionID: "s-lim",
				Err: &invoker.StreamError{Message: "Reached maximum number of turns (1)", Type: "error_max_turns"}})
	}}, limitCaps}
	h := newHarness(t, nil, inv)
	var out mcpadapter.Output
	res := h.call(context.Background(), t, "claude", args("hi", t.TempDir(), "max_turns", 1), &out)
	if !res.IsError || out.Status != mcpadapter.StatusFailed || out.SessionID != "s-lim" || out.Turns != 2 || out.Resume == "" {
		t.Errorf("result IsError %v, output %+v; want a failed result with the session, the turns and how to resume", res.IsError, out)
	}
}

func TestRegisterRefusesBadCeilings(t *testing.T) {
	for _, o := range []*mcpadapter.Options{{MaxBudgetUSD: -1}, {MaxTurns: -2}} {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
		if _, err := mcpadapter.Register(s, o, answer("codex")); err == nil {
			t.Errorf("Register(%+v) = nil, want an error", o)
		}
	}
}
