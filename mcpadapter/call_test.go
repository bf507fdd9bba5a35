package mcpadapter_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// policyLog records what Options.Approve saw.
type policyLog struct {
	mu    sync.Mutex
	calls []mcpadapter.Call
	asked []invoker.Approval
}

func (p *policyLog) add(call *mcpadapter.Call, a invoker.Approval) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, *call)
	p.asked = append(p.asked, a)
}

func (p *policyLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// TestApprove: Options.Approve decides first; Call.Defer hands the
// question to Options.Approvals, which answers as it does without Approve.
func TestApprove(t *testing.T) {
	allow := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}
	deny := func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		return invoker.Decision{Message: "not in this repository"}
	}
	allowAll := func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		return invoker.Decision{Allow: true}
	}
	deferAll := func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		return call.Defer(ctx, a)
	}
	policyDenial := `{"allow":false,"message":"denied by the MCP server's approval policy: run the command ` + "`touch made.txt`" + ` in /work/project"}`
	for _, tc := range []struct {
		name      string
		approve   func(context.Context, *mcpadapter.Call, invoker.Approval) invoker.Decision
		approvals mcpadapter.ApprovalPolicy
		fallback  mcpadapter.ApprovalPolicy
		elicit    bool   // the client declares elicitation
		asked     bool   // the client gets an elicitation
		want      string // the run's text: the Decision in JSON
	}{
		{name: "allow/approve denies", approve: deny,
			want: `{"allow":false,"message":"not in this repository"}`},
		{name: "allow/approve allows", approve: allowAll, want: `{"allow":true}`},
		{name: "allow/approve defers", approve: deferAll, want: `{"allow":true}`},
		{name: "deny/approve allows", approve: allowAll, approvals: mcpadapter.ApprovalsDeny,
			want: `{"allow":true}`},
		{name: "deny/approve defers", approve: deferAll, approvals: mcpadapter.ApprovalsDeny,
			want: policyDenial},
		{name: "elicit/approve denies, client not asked", approve: deny, approvals: mcpadapter.ApprovalsElicit,
			elicit: true, want: `{"allow":false,"message":"not in this repository"}`},
		{name: "elicit/approve defers, client asked", approve: deferAll, approvals: mcpadapter.ApprovalsElicit,
			elicit: true, asked: true, want: `{"allow":true}`},
		{name: "elicit/approve defers, client cannot be asked", approve: deferAll, approvals: mcpadapter.ApprovalsElicit,
			want: policyDenial},
		{name: "elicit/approve defers, fallback allow", approve: deferAll, approvals: mcpadapter.ApprovalsElicit,
			fallback: mcpadapter.ApprovalsAllow, want: `{"allow":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := newAsker("codex")
			var seen policyLog
			opts := &mcpadapter.Options{
				Approvals:        tc.approvals,
				ApprovalFallback: tc.fallback,
				Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
					seen.add(call, a)
					return tc.approve(ctx, call, a)
				},
			}
			el := &elicitations{res: allow}
			hc := harnessClient{protocol: legacyProtocol}
			if tc.elicit {
				hc.elicit = el.handle
			}
			h := newHarnessWith(t, hc, opts, inv)
			dir := t.TempDir()
			var out mcpadapter.Output
			h.call(context.Background(), t, "codex", args("make a file", dir), &out)
			if out.Status != mcpadapter.StatusCompleted || out.Text != tc.want {
				t.Errorf("output %+v, want completed with text %s", out, tc.want)
			}
			if n := el.count(); tc.asked != (n == 1) || n > 1 {
				t.Errorf("the client got %d elicitations, want asked=%v", n, tc.asked)
			}
			if seen.count() != 1 {
				t.Fatalf("Options.Approve called %d times, want once", seen.count())
			}
			call, a := seen.calls[0], seen.asked[0]
			if a.Command != askCommand.Command || a.Kind != "command" {
				t.Errorf("Options.Approve got %+v, want the agent's question %+v", a, askCommand)
			}
			if call.Tool != "codex" || call.Task != -1 || call.Run.Workdir != resolved(t, dir) ||
				call.Run.Permission != invoker.ReadOnly || call.Run.Prompt != "make a file" ||
				call.Run.Approve != nil || call.Run.OnEvent != nil {
				t.Errorf("Options.Approve got the call %+v, want tool codex, task -1, the run's checked request without callbacks", call)
			}
			if call.Request == nil || call.Request.Session == nil || call.Request.Params.Name != "codex" {
				t.Errorf("Call.Request = %+v, want the client's request with its session", call.Request)
			}
		})
	}
}

// TestApproveParallel: each task's question names its task.
func TestApproveParallel(t *testing.T) {
	inv := newAsker("codex")
	var seen policyLog
	h := newHarness(t, &mcpadapter.Options{Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		seen.add(call, a)
		return invoker.Decision{Allow: call.Task == 1}
	}}, inv)
	var out mcpadapter.ParallelOutput
	h.call(context.Background(), t, "codex"+mcpadapter.ParallelSuffix, map[string]any{
		"workdir": t.TempDir(),
		"tasks":   []map[string]any{{"prompt": "first"}, {"prompt": "second"}},
	}, &out)
	if len(out.Results) != 2 || out.Results[0].Text != `{"allow":false}` || out.Results[1].Text != `{"allow":true}` {
		t.Errorf("results %+v, want task 0 denied and task 1 allowed", out.Results)
	}
	tasks := map[int]string{}
	for _, c := range seen.calls {
		if c.Tool != "codex_parallel" {
			t.Errorf("Call.Tool = %q, want codex_parallel", c.Tool)
		}
		tasks[c.Task] = c.Run.Prompt
	}
	if tasks[0] != "first" || tasks[1] != "second" || len(tasks) != 2 {
		t.Errorf("Options.Approve saw tasks %v, want 0: first and 1: second", tasks)
	}
}

// TestApproveWarmSession: a warm session's questions go to Options.Approve
// with the call whose turn runs.
func TestApproveWarmSession(t *testing.T) {
	inv := &sessionAsker{asker: newAsker("codex")}
	var seen policyLog
	h := newHarness(t, &mcpadapter.Options{
		WarmSessions: mcpadapter.WarmSessions{MaxSessions: 1},
		Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
			seen.add(call, a)
			return invoker.Decision{Allow: call.Run.Prompt == "second"}
		},
	}, inv)
	dir := t.TempDir()
	var out mcpadapter.Output
	h.call(context.Background(), t, "codex", args("first", dir), &out)
	if out.Text != `{"allow":false}` || out.SessionID != warmID {
		t.Errorf("first call: output %+v, want a denial in session %s", out, warmID)
	}
	h.call(context.Background(), t, "codex", args("second", dir, "session_id", warmID), &out)
	if out.Text != `{"allow":true}` {
		t.Errorf("second call: output %+v, want an allow", out)
	}
	if n := inv.opened.Load(); n != 1 {
		t.Errorf("%d sessions opened, want 1 (the second call a turn of the warm one)", n)
	}
	if n := seen.count(); n != 2 || seen.calls[0].Run.Prompt != "first" || seen.calls[1].Run.Prompt != "second" {
		t.Errorf("Options.Approve saw %d calls %+v, want first then second", n, seen.calls)
	}
}

// wrapper is an Invoker wrapping another, as a program does to add its own
// control; approve, if not nil, becomes the run's Request.Approve, given
// the callback the adapter passed (nil when it passed none).
type wrapper struct {
	invoker.Invoker
	approve func(next func(context.Context, invoker.Approval) invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision
	servers []invoker.MCPServer // appended to Request.MCPServers

	mu       sync.Mutex
	received []invoker.Request // what the adapter passed
}

func (w *wrapper) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	w.mu.Lock()
	w.received = append(w.received, req)
	w.mu.Unlock()
	if w.approve != nil {
		req.Approve = w.approve(req.Approve)
	}
	req.MCPServers = append(req.MCPServers, w.servers...)
	return w.Invoker.Invoke(ctx, req)
}

func (w *wrapper) last(t *testing.T) invoker.Request {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.received) == 0 {
		t.Fatal("the wrapper was not called")
	}
	return w.received[len(w.received)-1]
}

// TestApproveWrapper pins the precedence between the server's policy and
// an Invoker wrapper that sets Request.Approve: the wrapper receives the
// server's callback and decides last; one that calls what it received
// keeps the server's policy, one that replaces it does not.
func TestApproveWrapper(t *testing.T) {
	type approveFunc = func(context.Context, invoker.Approval) invoker.Decision
	chain := func(next approveFunc) approveFunc {
		return func(ctx context.Context, a invoker.Approval) invoker.Decision {
			if strings.HasPrefix(a.Command, "rm ") {
				return invoker.Decision{Message: "the wrapper refuses rm"}
			}
			if next == nil {
				return invoker.Decision{Allow: true}
			}
			return next(ctx, a)
		}
	}
	replace := func(approveFunc) approveFunc {
		return func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
	}
	serverDenies := func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		return invoker.Decision{Message: "the server refuses"}
	}
	for _, tc := range []struct {
		name     string
		opts     mcpadapter.Options
		wrap     func(approveFunc) approveFunc
		received bool   // the wrapper receives a callback
		want     string // the run's text
		policy   bool   // Options.Approve is asked
	}{
		{name: "no server policy: the wrapper's alone", wrap: chain,
			want: `{"allow":true}`},
		{name: "Approve: a chaining wrapper keeps it", opts: mcpadapter.Options{Approve: serverDenies}, wrap: chain,
			received: true, policy: true, want: `{"allow":false,"message":"the server refuses"}`},
		{name: "Approvals deny: a chaining wrapper keeps it", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsDeny}, wrap: chain,
			received: true, want: `"message":"denied by the MCP server's approval policy`},
		{name: "Approve: a replacing wrapper decides alone", opts: mcpadapter.Options{Approve: serverDenies}, wrap: replace,
			received: true, want: `{"allow":true}`},
		{name: "Approve: no wrapper callback", opts: mcpadapter.Options{Approve: serverDenies},
			received: true, policy: true, want: `{"allow":false,"message":"the server refuses"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen policyLog
			opts := tc.opts
			if opts.Approve != nil {
				approve := opts.Approve
				opts.Approve = func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
					seen.add(call, a)
					return approve(ctx, call, a)
				}
			}
			w := &wrapper{Invoker: newAsker("codex"), approve: tc.wrap}
			h := newHarness(t, &opts, w)
			var out mcpadapter.Output
			h.call(context.Background(), t, "codex", args("make a file", t.TempDir()), &out)
			if !strings.Contains(out.Text, tc.want) {
				t.Errorf("output %+v, want text holding %s", out, tc.want)
			}
			if got := w.last(t).Approve != nil; got != tc.received {
				t.Errorf("the wrapper received a callback: %v, want %v", got, tc.received)
			}
			if got := seen.count() > 0; got != tc.policy {
				t.Errorf("Options.Approve asked: %v, want %v", got, tc.policy)
			}
		})
	}
}

// TestApproveRegister: Options.Approve cannot apply to a CLI that takes no
// approval callback, so Register refuses such an invoker rather than run
// it without the policy.
func TestApproveRegister(t *testing.T) {
	inv := newAsker("gemini")
	inv.noApprove = true
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	_, err := mcpadapter.Register(s, &mcpadapter.Options{
		Approve: func(context.Context, *mcpadapter.Call, invoker.Approval) invoker.Decision { return invoker.Decision{} },
	}, newAsker("codex"), inv)
	if err == nil || !strings.Contains(err.Error(), "Options.Approve") || !strings.Contains(err.Error(), `"gemini"`) ||
		!strings.Contains(err.Error(), "Capabilities.Approve") {
		t.Errorf("Register() error = %v, want one naming Options.Approve, the invoker gemini and Capabilities.Approve", err)
	}
}

// TestApproveSeesIdentity: the Call a policy gets says who made it (the
// bearer token's name) and when, as Tools.Calls lists the same call.
func TestApproveSeesIdentity(t *testing.T) {
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	var seen policyLog
	opts := &mcpadapter.Options{
		HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens},
		Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
			seen.add(call, a)
			return invoker.Decision{Allow: true}
		},
	}
	s := newAccessServer(t, opts, false, newAsker("codex"))
	cs := s.connect(t, aliceToken)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("touch made.txt", t.TempDir())}); err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	if seen.count() != 1 {
		t.Fatalf("Approve called %d times, want 1", seen.count())
	}
	c := seen.calls[0]
	if c.Identity != "alice" || c.Session != cs.ID() || c.Start.IsZero() || c.Task != -1 || c.Tool != "codex" {
		t.Errorf("Call = {Tool %q Identity %q Session %q Start %v Task %d}, want codex, alice, session %q, a start, task -1",
			c.Tool, c.Identity, c.Session, c.Start, c.Task, cs.ID())
	}
}
