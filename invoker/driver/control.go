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
// replaced by its URL and the token's header. opts has the hooks of the
// session: the handlers' panics, the calls' contexts. Its errors come before anything else starts: a
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

// A pendingAsk is an approval of a line whose events are being delivered,
// for the turn the line belongs to.
type pendingAsk struct {
	ts *turnState
	a  Approval
}

// askPending asks the approvals of the line whose events were just
// delivered; it is the run's afterLine.
func (s *session) askPending() {
	s.r.decMu.Lock()
	defer s.r.decMu.Unlock()
	if s.r.panicked.Load() {
		// A callback panicked: the tree is being killed, and nothing of
		// the caller's is called any more.
		s.pending = nil
		return
	}
	for _, p := range s.pending {
		s.ask(p.ts, p.a)
	}
	s.pending = nil
}

// ask handles one approval of the protocol's, for the turn ts (nil
// between turns). Without a turn or a callback the CLI is answered with a
// denial at once. Otherwise the callback runs on a goroutine of its own
// with the turn's context, and the answer is written when it returns, or
// the question withdrawn when the turn ends first. The caller holds the
// protocol's lock.
func (s *session) ask(ts *turnState, a Approval) {
	approve := s.sreq.Approve
	over := true
	if ts != nil {
		s.mu.Lock()
		if over = ts.over; !over && approve != nil {
			ts.calls.Add(2)
		}
		s.mu.Unlock()
	}
	if over || approve == nil {
		why := "no turn is in progress"
		if !over {
			why = "the program gave no approval callback"
		}
		s.write(answerApproval(a, invoker.Decision{Message: "Denied: " + why + "."})...)
		return
	}
	req := a.Request
	if req.SessionID == "" {
		req.SessionID = s.ID()
	}
	if req.Cwd == "" && req.Kind == "command" {
		req.Cwd = s.sreq.Workdir // where the CLI runs its commands unless it says otherwise
	}
	decided := make(chan invoker.Decision, 1)
	s.r.approving.Add(1)
	go func() {
		defer ts.calls.Done()
		defer func() {
			s.r.approving.Add(-1)
			s.r.touch() // the CLI's silence counts from the decision
		}()
		var d invoker.Decision
		if s.r.call("Approve", func() { d = approve(ts.ctx, req) }) {
			decided <- d
		}
	}()
	go func() {
		defer ts.calls.Done()
		var d invoker.Decision
		withdrawn := false
		select {
		case d = <-decided:
		case <-ts.ctx.Done():
			withdrawn = true
		case <-s.done:
			return
		}
		s.r.decMu.Lock()
		// A decision that comes once the CLI was asked to end the turn
		// is not carried out: the turn's question is withdrawn (the lock
		// orders this against the interrupt's lines).
		if withdrawn || ts.interrupted || ts.ctx.Err() != nil {
			if a.Cancel != nil {
				lines := safeLines(a.Cancel)
				s.r.decMu.Unlock()
				s.write(lines...)
				return
			}
			d = invoker.Decision{Message: "Denied: the turn ended before the program decided."}
		}
		lines := answerApproval(a, d)
		s.r.decMu.Unlock()
		s.write(lines...)
	}()
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
