package driver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file holds the engine's side of two-way control: the checks of
// Request.Approve and Request.MCPServers, the hosting of Go MCP servers for
// the length of a session, and the answers to the approvals and in-band
// MCP messages a session protocol hands over (Step.Approvals, Step.Calls).

// checkMCPServers checks the MCP servers of a conversation: unique, usable
// names, and exactly one way to reach each. Its errors match
// ErrInvalidRequest.
func checkMCPServers(servers []invoker.MCPServer) error {
	seen := make(map[string]bool, len(servers))
	for i, s := range servers {
		at := fmt.Sprintf("Request.MCPServers[%d] (%q)", i, s.Name)
		if err := mcphost.CheckName(s.Name); err != nil {
			return invalid("%s: %v", at, err)
		}
		if seen[s.Name] {
			return invalid("%s: the name is given twice: give each server its own name", at)
		}
		seen[s.Name] = true
		n := 0
		for _, set := range []bool{s.Server != nil, s.Command != "", s.URL != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return invalid("%s: set exactly one of Server (tools written in Go), Command (a stdio server) and URL (an HTTP server); %d are set", at, n)
		}
		if s.Command == "" && (len(s.Args) > 0 || len(s.Env) > 0) {
			return invalid("%s: Args and Env are for a Command server", at)
		}
		if s.URL == "" && len(s.Headers) > 0 {
			return invalid("%s: Headers are for a URL server", at)
		}
		if s.URL != "" {
			// The URL is not quoted back: it may carry a credential.
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return invalid("%s: URL is not an http or https URL with a host", at)
			}
		}
		for _, v := range append([]string{s.Command}, s.Args...) {
			if strings.IndexByte(v, 0) >= 0 {
				return invalid("%s: Command and Args cannot hold a NUL byte", at)
			}
		}
		for j, kv := range s.Env {
			if problem := envProblem(kv); problem != "" {
				return invalid("%s: Env[%d] %s", at, j, problem)
			}
		}
		for k, v := range s.Headers {
			if !headerName(k) {
				return invalid("%s: header name %q is not an HTTP token", at, k)
			}
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return invalid("%s: the value of header %q holds a control character", at, k)
			}
		}
	}
	return nil
}

// headerName reports whether k is an HTTP header name: a token of
// RFC 9110's tchar.
func headerName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r) {
			continue
		}
		return false
	}
	return true
}

// goServers returns the Go servers of servers by name, or nil when there
// is none.
func goServers(servers []invoker.MCPServer) map[string]*mcp.Server {
	var out map[string]*mcp.Server
	for _, s := range servers {
		if s.Server != nil {
			if out == nil {
				out = make(map[string]*mcp.Server)
			}
			out[s.Name] = s.Server
		}
	}
	return out
}

// checkTwoWay refuses Go servers for a backend that cannot serve them,
// and two-way control for one without a long-lived mode, which alone
// carries it.
func (e *engine) checkTwoWay(req *invoker.Request) error {
	c := e.b.Capabilities()
	if !c.GoTools && goServers(req.MCPServers) != nil {
		return &unsupportedError{field: "MCPServers", hint: e.b.Hint("GoTools"),
			what: "tools written in Go (MCPServer.Server; Capabilities.GoTools is false)"}
	}
	if !c.Sessions {
		const hint = "two-way control needs the CLI's long-lived mode, and Capabilities.Sessions is false"
		if req.Approve != nil {
			return &unsupportedError{field: "Approve", hint: hint}
		}
		if len(req.MCPServers) > 0 {
			return &unsupportedError{field: "MCPServers", hint: hint}
		}
	}
	return nil
}

// tools hosts a session's Go MCP servers: in band through a Bridge for a
// backend whose protocol carries their messages (InBandMCP), else over
// loopback HTTP.
type tools struct {
	host   *mcphost.Host
	bridge *mcphost.Bridge
}

// startTools starts hosting the Go servers of req, if it has any, and
// returns req as the backend must see it: for a Host, each Go server
// replaced by its URL and the token's header. opts are the session's
// hooks and limits (a handler's panic, a call's context, the longest
// reply in band). Its errors come before anything else starts: a
// *mcphost.ConfigError (a bad tool schema, a tool name clash) wrapped in
// ErrInvalidRequest, or the listener's error.
func (e *engine) startTools(req invoker.SessionRequest, opts *mcphost.Options) (*tools, invoker.SessionRequest, error) {
	servers := goServers(req.MCPServers)
	if servers == nil {
		return &tools{}, req, nil
	}
	if _, ok := e.b.(InBandMCP); ok {
		b, err := mcphost.NewBridge(context.Background(), servers, opts)
		if err != nil {
			return nil, req, fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return &tools{bridge: b}, req, nil
	}
	h, err := mcphost.Serve(context.Background(), servers, opts)
	if err != nil {
		var le *mcphost.ListenError
		if errors.As(err, &le) {
			// The listener's error (a *net.OpError) is in the chain.
			return nil, req, fmt.Errorf("cannot serve the Go MCP servers: %w", err)
		}
		return nil, req, fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
	}
	rewritten := make([]invoker.MCPServer, len(req.MCPServers))
	for i, s := range req.MCPServers {
		if s.Server != nil {
			s = invoker.MCPServer{Name: s.Name, URL: h.URL(s.Name),
				Headers: map[string]string{"Authorization": "Bearer " + h.Token()}}
		}
		rewritten[i] = s
	}
	req.MCPServers = rewritten
	return &tools{host: h}, req, nil
}

// callContext is the context of a Go tool call that begins now: the
// turn's, so that the handler has the values and the deadline of the
// context Turn was given and is cancelled with the turn; between turns,
// the session's.
func (s *session) callContext() context.Context {
	s.mu.Lock()
	ts := s.cur
	s.mu.Unlock()
	if ts != nil {
		return ts.ctx
	}
	return s.r.ctx
}

// cancelCalls cancels the contexts of the tool calls in flight, for a turn
// that is being interrupted.
func (t *tools) cancelCalls() {
	if t.host != nil {
		t.host.CancelCalls()
	}
	if t.bridge != nil {
		t.bridge.CancelCalls()
	}
}

// close ends the hosting and returns once no handler runs.
func (t *tools) close() {
	if t.host != nil {
		t.host.Close()
	}
	if t.bridge != nil {
		t.bridge.Close()
	}
}

// maxPendingApprovals is how many questions of one turn may wait for
// Approve at once. A question the CLI asks beyond it is denied at once,
// without asking, with a message the model reads (where the CLI carries
// one) and a KindWarning event for the program.
//
// Each waiting question holds a goroutine running Approve, and whatever
// Approve holds: without a cap, a CLI that asks without end (a loop, a
// prompt injection) makes the program hold without end until the turn's
// deadline. A model asks about the parallel tool calls of one response at
// most, a few at a time; 64 leaves room for the subagents of a CLI that
// runs several, each asking. The cap is the engine's, not an option: no
// turn that a person or a policy can follow needs more, and a program that
// decides at once never holds more than a few.
const maxPendingApprovals = 64

// A pendingAsk is an approval of a line whose events are being delivered,
// for the turn the line belongs to.
type pendingAsk struct {
	ts *turnState
	a  Approval
}

// A question is an approval given to Approve and not yet answered or
// withdrawn. Its fields are guarded by the decoder lock.
type question struct {
	a       Approval
	settled bool // its answer, or its withdrawal, was written
}

// askPending asks the approvals of the line whose events were just
// delivered; it is the run's afterLine. A question refused because too
// many wait is reported as a KindWarning event, once the decoder lock is
// released (OnEvent may call back into the session).
func (s *session) askPending() {
	s.r.decMu.Lock()
	if s.r.panicked.Load() {
		// A callback panicked: the tree is being killed, and nothing of
		// the caller's is called any more.
		s.pending = nil
		s.r.decMu.Unlock()
		return
	}
	var refused []invoker.Event
	for _, p := range s.pending {
		if !s.ask(p.ts, p.a) {
			tool := p.a.Request.Tool
			refused = append(refused, invoker.Event{Kind: invoker.KindWarning, Tool: &tool, Raw: p.a.Request.Raw,
				Text: fmt.Sprintf("refused without asking Approve: %s %q (%d questions of this turn already wait for a decision)",
					p.a.Request.Kind, what(p.a.Request), maxPendingApprovals)})
		}
	}
	s.pending = nil
	s.r.decMu.Unlock()
	s.r.deliver(refused)
}

// what names the action of a for a message: its command, its paths, or
// its tool's name.
func what(a invoker.Approval) string {
	switch {
	case a.Command != "":
		return a.Command
	case len(a.Paths) > 0:
		return strings.Join(a.Paths, ", ")
	}
	return a.Tool.Name
}

// ask handles one approval of the protocol's, for the turn ts (nil
// between turns). Without a turn or a callback the CLI is answered with a
// denial at once, and so it is when maxPendingApprovals questions of the
// turn already wait: ask then returns false. Otherwise Approve runs on a
// goroutine of its own with the turn's context, and the answer is written
// when it returns, unless the turn ended first: then the question was
// withdrawn (see withdraw) and the answer is dropped. The caller holds the
// decoder lock.
func (s *session) ask(ts *turnState, a Approval) bool {
	approve := s.sreq.Approve
	why, full := "", false
	switch {
	case ts == nil:
		why = "no turn is in progress"
	default:
		s.mu.Lock()
		switch {
		case ts.over:
			why = "no turn is in progress"
		case approve == nil:
			why = "the program gave no approval callback"
		case ts.waiting >= maxPendingApprovals:
			why, full = fmt.Sprintf("%d earlier requests of this turn still wait for the program's decision; ask again once they are answered", maxPendingApprovals), true
		default:
			ts.waiting++
			ts.calls.Add(1)
		}
		s.mu.Unlock()
	}
	if why != "" {
		msg := "Denied: " + why + "."
		if full {
			msg = "Denied without asking the program: " + why + "."
		}
		s.write(answerApproval(a, invoker.Decision{Message: msg})...)
		return !full
	}
	req := a.Request
	if req.SessionID == "" {
		req.SessionID = s.ID()
	}
	if req.Cwd == "" && req.Kind == "command" {
		req.Cwd = s.sreq.Workdir // where the CLI runs its commands unless it says otherwise
	}
	q := &question{a: a}
	if ts.questions == nil {
		ts.questions = make(map[*question]struct{})
	}
	ts.questions[q] = struct{}{}
	s.r.approving.Add(1)
	go s.decide(ts, q, approve, req)
	return true
}

// decide runs Approve for the question q of the turn ts and writes its
// answer, unless the question was withdrawn meanwhile, or the CLI was
// asked to end the turn: a decision that comes then is not carried out,
// and the question is withdrawn instead (the decoder lock orders this
// against the interrupt's lines). It is the one goroutine a question
// costs.
func (s *session) decide(ts *turnState, q *question, approve func(context.Context, invoker.Approval) invoker.Decision, req invoker.Approval) {
	defer func() {
		s.mu.Lock()
		ts.waiting--
		s.mu.Unlock()
		ts.calls.Done()
	}()
	defer func() {
		s.r.approving.Add(-1)
		s.r.touch() // the CLI's silence counts from the decision
	}()
	var d invoker.Decision
	if !s.r.call("Approve", func() { d = approve(ts.ctx, req) }) {
		return // the tree is being killed; the turn's end withdraws q
	}
	s.r.decMu.Lock()
	if q.settled {
		s.r.decMu.Unlock()
		return
	}
	if !ts.interrupted && ts.ctx.Err() == nil && ts.caller.Err() != nil {
		// The caller's context is done, and the interrupt for it is on
		// its way: a decision made now may have been made because of
		// that (a callback that watches a context of the caller's own,
		// such as an MCP call's), and carried out before the interrupt
		// it could let the CLI go on with the turn. The interrupt's
		// withdrawal answers q, after the interrupt's lines.
		s.r.decMu.Unlock()
		return
	}
	q.settled = true
	delete(ts.questions, q)
	var lines [][]byte
	if ts.interrupted || ts.ctx.Err() != nil {
		lines = withdrawal(q.a)
	} else {
		lines = answerApproval(q.a, d)
	}
	s.r.decMu.Unlock()
	s.write(lines...)
}

// withdraw withdraws every question of the turn ts that is still waiting
// for Approve, once the CLI was asked to end the turn or the turn ended:
// the CLI is answered at once, whenever Approve returns.
func (s *session) withdraw(ts *turnState) {
	s.r.decMu.Lock()
	var lines [][]byte
	for q := range ts.questions {
		q.settled = true
		lines = append(lines, withdrawal(q.a)...)
	}
	clear(ts.questions)
	s.r.decMu.Unlock()
	s.write(lines...)
}

// withdrawal returns the protocol's lines that withdraw the question a:
// its Cancel, else a denial.
func withdrawal(a Approval) [][]byte {
	if a.Cancel != nil {
		return safeLines(a.Cancel)
	}
	return answerApproval(a, invoker.Decision{Message: "Denied: the turn ended before the program decided."})
}

// answerApproval returns the protocol's lines for decision d of a.
func answerApproval(a Approval, d invoker.Decision) [][]byte {
	if a.Answer == nil {
		return nil
	}
	return safeLines(func() [][]byte { return a.Answer(d) })
}

// safeLines returns what f returns, or nothing when it panics: a protocol
// must never panic, and a panic of one must not take the program down.
func safeLines(f func() [][]byte) (lines [][]byte) {
	defer func() {
		if recover() != nil {
			lines = nil
		}
	}()
	return f()
}

// deliver hands one in-band MCP message of the protocol's to the session's
// Go servers, for the turn ts (nil between turns), and writes the answer.
// A call's context is the turn's, cancelled when the turn is; between
// turns it is the session's. The caller holds the protocol's lock.
func (s *session) deliver(ts *turnState, c MCPCall) {
	if s.tools.bridge == nil {
		s.write(safeLines(func() [][]byte {
			return c.Answer(nil, fmt.Errorf("no Go MCP server named %q in this session", c.Server))
		})...)
		return
	}
	ctx := s.r.ctx
	if ts != nil {
		ctx = ts.ctx
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		reply, err := s.tools.bridge.Handle(ctx, c.Server, c.Message)
		s.r.decMu.Lock()
		lines := safeLines(func() [][]byte { return c.Answer(reply, err) })
		s.r.decMu.Unlock()
		s.write(lines...)
	}()
}
