package mcpadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// legacyProtocol is the newest protocol version in which a server may send
// the client a request during a call, which elicitation takes.
const legacyProtocol = "2025-11-25"

// askCommand is the question the asking invokers put to their callback.
var askCommand = invoker.Approval{Kind: "command", Command: "touch made.txt", Cwd: "/work/project",
	Tool: invoker.Tool{Name: "Bash", ID: "toolu_1"}}

// asker is an invoker whose CLI takes an approval callback
// (Capabilities.Approve, unless noApprove) and whose run asks it about
// askCommand once. The run answers "no callback" when the request carries
// none, and the Decision as JSON otherwise. A run whose context is done
// returns its error; the decision is sent on decided either way.
type asker struct {
	invokeOnly
	name      string
	noApprove bool
	// turnCtx, if not nil, gives the context the run hands its callback
	// (a turn's context, which the engine may end before the call's).
	turnCtx func(ctx context.Context) context.Context
	decided chan invoker.Decision
}

func newAsker(name string) *asker {
	return &asker{name: name, decided: make(chan invoker.Decision, 10)}
}

func (a *asker) Name() string { return a.name }

func (a *asker) Capabilities() invoker.Capabilities {
	c := a.invokeOnly.Capabilities()
	c.Approve = !a.noApprove
	return c
}

func (a *asker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if req.Approve == nil {
		return &invoker.Result{Text: "no callback"}, nil
	}
	actx := ctx
	if a.turnCtx != nil {
		actx = a.turnCtx(ctx)
	}
	d := req.Approve(actx, askCommand)
	a.decided <- d
	b, _ := json.Marshal(d)
	return &invoker.Result{Text: string(b)}, ctx.Err()
}

// elicitations records the elicitations a client received and answers
// them with a fixed result (or error).
type elicitations struct {
	res *mcp.ElicitResult
	err error

	mu   sync.Mutex
	seen []*mcp.ElicitParams
}

func (e *elicitations) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	e.seen = append(e.seen, req.Params)
	e.mu.Unlock()
	return e.res, e.err
}

func (e *elicitations) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

// TestApprovals runs a call whose agent asks permission once, under each
// policy and kind of client, and checks what the agent was told and
// whether the client was asked.
func TestApprovals(t *testing.T) {
	allow := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}
	for _, tc := range []struct {
		name      string
		opts      mcpadapter.Options
		noApprove bool // the CLI takes no callback
		elicit    *elicitations
		protocol  string
		asked     bool   // the client gets an elicitation
		want      string // the run's text: "no callback" or a Decision in JSON
	}{
		{name: "default/no callback", elicit: &elicitations{res: allow}, protocol: legacyProtocol,
			want: "no callback"},
		{name: "allow/no callback", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsAllow},
			elicit: &elicitations{res: allow}, protocol: legacyProtocol, want: "no callback"},
		{name: "deny/client not asked", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsDeny},
			elicit: &elicitations{res: allow}, protocol: legacyProtocol,
			want: `{"allow":false,"message":"denied by the MCP server's approval policy: run the command ` + "`touch made.txt`" + ` in /work/project"}`},
		{name: "elicit/CLI without callback", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			noApprove: true, elicit: &elicitations{res: allow}, protocol: legacyProtocol, want: "no callback"},
		{name: "elicit/accept allow", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit: &elicitations{res: allow}, protocol: legacyProtocol, asked: true,
			want: `{"allow":true}`},
		{name: "elicit/accept allow for session", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "for_session": true}}},
			protocol: legacyProtocol, asked: true, want: `{"allow":true,"for_session":true}`},
		{name: "elicit/accept deny with message", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "message": "use make instead"}}},
			protocol: legacyProtocol, asked: true, want: `{"allow":false,"message":"denied by the user: use make instead"}`},
		{name: "elicit/accept without content", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{res: &mcp.ElicitResult{Action: "accept"}},
			protocol: legacyProtocol, asked: true, want: `{"allow":false,"message":"denied: the MCP client accepted the question without a decision"}`},
		{name: "elicit/decline", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{res: &mcp.ElicitResult{Action: "decline"}},
			protocol: legacyProtocol, asked: true, want: `{"allow":false,"message":"denied by the user"}`},
		{name: "elicit/cancel", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{res: &mcp.ElicitResult{Action: "cancel"}},
			protocol: legacyProtocol, asked: true, want: `{"allow":false,"message":"denied: the user dismissed the question"}`},
		{name: "elicit/client error", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit:   &elicitations{err: errors.New("no user here")},
			protocol: legacyProtocol, asked: true, want: `"allow":false,"message":"denied: the MCP client could not be asked (`},
		{name: "elicit/client without elicitation, default fallback", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			protocol: legacyProtocol,
			want:     `{"allow":false,"message":"denied by the MCP server's approval policy: run the command ` + "`touch made.txt`" + ` in /work/project"}`},
		{name: "elicit/client without elicitation, fallback allow", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit, ApprovalFallback: mcpadapter.ApprovalsAllow},
			protocol: legacyProtocol, want: "no callback"},
		{name: "elicit/client on 2026-07-28, fallback deny", opts: mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit},
			elicit: &elicitations{res: allow}, protocol: "",
			want: `{"allow":false,"message":"denied by the MCP server's approval policy: run the command ` + "`touch made.txt`" + ` in /work/project"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := newAsker("codex")
			inv.noApprove = tc.noApprove
			hc := harnessClient{protocol: tc.protocol}
			if tc.elicit != nil {
				hc.elicit = tc.elicit.handle
			}
			opts := tc.opts
			h := newHarnessWith(t, hc, &opts, inv)
			var out mcpadapter.Output
			h.call(context.Background(), t, "codex", args("make a file", t.TempDir()), &out)
			if out.Status != mcpadapter.StatusCompleted || !strings.Contains(out.Text, tc.want) {
				t.Errorf("output %+v, want completed with text holding %s", out, tc.want)
			}
			n := 0
			if tc.elicit != nil {
				n = tc.elicit.count()
			}
			if tc.asked != (n == 1) || n > 1 {
				t.Errorf("the client got %d elicitations, want asked=%v", n, tc.asked)
			}
			if tc.asked {
				p := tc.elicit.seen[0]
				for _, s := range []string{"codex", "run the command `touch made.txt` in /work/project", "Allow it?"} {
					if !strings.Contains(p.Message, s) {
						t.Errorf("elicitation message %q does not say %q", p.Message, s)
					}
				}
				schema, _ := json.Marshal(p.RequestedSchema)
				if !strings.Contains(string(schema), `"enum":["allow","deny"]`) || !strings.Contains(string(schema), `"required":["decision"]`) {
					t.Errorf("elicitation schema %s, want a required decision among allow and deny", schema)
				}
			}
		})
	}
}

func TestApprovalsOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		opts mcpadapter.Options
		want string
	}{
		{mcpadapter.Options{Approvals: "ask"}, `Options.Approvals: unknown policy "ask"`},
		{mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit, ApprovalFallback: mcpadapter.ApprovalsElicit}, `Options.ApprovalFallback: "elicit" is not a policy`},
		{mcpadapter.Options{ApprovalFallback: "maybe"}, `Options.ApprovalFallback: "maybe"`},
	} {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
		_, err := mcpadapter.Register(s, &tc.opts, newAsker("codex"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%+v) error = %v, want one saying %q", tc.opts, err, tc.want)
		}
	}
}

// TestApprovalsCancelWhileAsking: the call, or only the agent's turn, ends
// while the client's user has not answered. The question is withdrawn (the
// client's handler sees its context end), the agent is told no, and the
// call ends; TestMain checks that no goroutine is left.
func TestApprovalsCancelWhileAsking(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn bool // the turn's context ends, not the call's
	}{{"call cancelled", false}, {"turn ended", true}} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan struct{}, 1)
			withdrawn := make(chan error, 1)
			release := make(chan struct{})
			defer close(release)
			hc := harnessClient{protocol: legacyProtocol, elicit: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- struct{}{}
				select {
				case <-ctx.Done():
					withdrawn <- ctx.Err()
					return nil, ctx.Err()
				case <-release: // the test failed; do not hang its teardown
					return &mcp.ElicitResult{Action: "cancel"}, nil
				}
			}}
			inv := newAsker("codex")
			endTurn := make(chan struct{})
			if tc.turn {
				inv.turnCtx = func(ctx context.Context) context.Context {
					tctx, cancel := context.WithCancel(ctx)
					go func() {
						select {
						case <-endTurn:
						case <-ctx.Done():
						}
						cancel()
					}()
					return tctx
				}
			}
			h := newHarnessWith(t, hc, &mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit}, inv)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan result, 1)
			if !tc.turn {
				h.abandon()
			}
			go func() {
				res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: args("make a file", t.TempDir())})
				done <- result{res, err}
			}()
			wait := testenv.Timeout(testenv.Hang)
			select {
			case <-asked:
			case <-time.After(wait):
				t.Fatal("the client was not asked")
			}
			if tc.turn {
				close(endTurn)
			} else {
				cancel()
			}
			select {
			case err := <-withdrawn:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the client's handler ended with %v, want context.Canceled", err)
				}
			case <-time.After(wait):
				t.Fatal("the elicitation was not withdrawn from the client")
			}
			select {
			case d := <-inv.decided:
				if d.Allow || !strings.Contains(d.Message, "withdrawn") {
					t.Errorf("decision %+v, want a denial saying the question was withdrawn", d)
				}
			case <-time.After(wait):
				t.Fatal("the callback did not return")
			}
			r := <-done
			if tc.turn {
				var out mcpadapter.Output
				if r.err != nil {
					t.Fatalf("CallTool error = %v", r.err)
				}
				decode(t, r.res, &out)
				if out.Status != mcpadapter.StatusCompleted || !strings.Contains(out.Text, "withdrawn") {
					t.Errorf("output %+v, want the run's answer holding the denial", out)
				}
			} else if !errors.Is(r.err, context.Canceled) {
				t.Errorf("CallTool error = %v, want context.Canceled", r.err)
			}
			waitCtx, stop := context.WithTimeout(context.Background(), wait)
			defer stop()
			if err := h.tools.Wait(waitCtx); err != nil {
				t.Errorf("Tools.Wait() = %v with %d calls in progress", err, h.tools.Active())
			}
		})
	}
}

// sessionAsker is an asker whose CLI holds sessions: the callback is the
// session's (SessionRequest.Approve), and each turn asks it once.
type sessionAsker struct {
	*asker
	opened atomic.Int64
}

func (a *sessionAsker) Capabilities() invoker.Capabilities {
	c := a.asker.Capabilities()
	c.Sessions = true
	return c
}

func (a *sessionAsker) OpenSession(ctx context.Context, req invoker.SessionRequest) (invoker.Session, error) {
	a.opened.Add(1)
	return &askingSession{id: warmID, approve: req.Approve, done: make(chan struct{})}, nil
}

const warmID = "0c7d2a4e-5f61-4b8a-9c3d-7e2f1a0b9c84"

type askingSession struct {
	id      string
	approve func(context.Context, invoker.Approval) invoker.Decision
	once    sync.Once
	done    chan struct{}
}

func (s *askingSession) Turn(ctx context.Context, t invoker.TurnRequest) (*invoker.Result, error) {
	if t.OnEvent != nil {
		t.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: s.id})
	}
	if s.approve == nil {
		return &invoker.Result{SessionID: s.id, Text: "no callback"}, nil
	}
	b, _ := json.Marshal(s.approve(ctx, askCommand))
	return &invoker.Result{SessionID: s.id, Text: string(b)}, nil
}
func (s *askingSession) Steer(context.Context, string) error { return invoker.ErrUnsupported }
func (s *askingSession) ID() string                          { return s.id }
func (s *askingSession) Done() <-chan struct{}               { return s.done }
func (s *askingSession) Err() error                          { return nil }
func (s *askingSession) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

// TestApprovalsWarmSession: a warm session's questions go to the client of
// the call whose turn runs. The first call's client can be asked and
// allows; the second call, continuing the conversation in the same
// process, comes from a client without elicitation and gets the fallback.
func TestApprovalsWarmSession(t *testing.T) {
	inv := &sessionAsker{asker: newAsker("codex")}
	el := &elicitations{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}}
	h := newHarnessWith(t, harnessClient{protocol: legacyProtocol, elicit: el.handle},
		&mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit, WarmSessions: mcpadapter.WarmSessions{MaxSessions: 1}}, inv)
	dir := t.TempDir()
	var out mcpadapter.Output
	h.call(context.Background(), t, "codex", args("make a file", dir), &out)
	if out.Text != `{"allow":true}` || out.SessionID != warmID {
		t.Errorf("first call: output %+v, want the client's allow in session %s", out, warmID)
	}

	// A second client, without elicitation, on the same server.
	ct, st := mcp.NewInMemoryTransports()
	ss, err := h.server.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "v0"}, nil).
		Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("and another", dir, "session_id", warmID)})
	if err != nil {
		t.Fatal(err)
	}
	decode(t, res, &out)
	if !strings.Contains(out.Text, `"allow":false`) || !strings.Contains(out.Text, "approval policy") {
		t.Errorf("second call: output %+v, want the fallback's denial", out)
	}
	if n := inv.opened.Load(); n != 1 {
		t.Errorf("%d sessions opened, want 1 (the second call a turn of the warm one)", n)
	}
	if n := el.count(); n != 1 {
		t.Errorf("the first client got %d elicitations, want 1", n)
	}
	if err := cs.Close(); err != nil {
		t.Error(err)
	}
	if err := ss.Wait(); err != nil {
		t.Error(err)
	}
}

// TestApprovalsOverHTTP: over streamable HTTP the elicitation travels on
// the call's own response stream, which is the only one a client without
// a standalone stream reads.
func TestApprovalsOverHTTP(t *testing.T) {
	inv := newAsker("codex")
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit}, inv)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(tools.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	defer hs.Close()
	el := &elicitations{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "for_session": true}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "v0"}, &mcp.ClientOptions{ElicitationHandler: el.handle}).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("make a file", t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	var out mcpadapter.Output
	decode(t, res, &out)
	if out.Text != `{"allow":true,"for_session":true}` || el.count() != 1 {
		t.Errorf("output %+v after %d elicitations, want the client's allow for the session after one", out, el.count())
	}
	if err := cs.Close(); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := tools.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}
