package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Go tools for the CLI: the checks of Request.MCPServers and of two-way
// control, the hosting of Go MCP servers for the length of a session, and
// the delivery of the in-band MCP messages a session protocol hands over
// (Step.Calls). The approvals are in approvals.go.

// checkMCPServers checks the MCP servers of a conversation
// (mcphost.CheckServers). Its errors match ErrInvalidRequest.
func checkMCPServers(servers []invoker.MCPServer) error {
	if err := mcphost.CheckServers("Request.MCPServers", servers); err != nil {
		return invalid("%v", err)
	}
	return nil
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
	c := e.declared()
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
	if e.inBand != nil && e.inBand.InBand(&req) {
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

// withGoServers returns served, the MCP servers of a request as
// startTools rewrote them, with the Server of each Go server of orig (the
// request's own, in the same order) kept beside the URL it was given: the
// protocol reads the tools of the Go servers from it.
func withGoServers(served, orig []invoker.MCPServer) []invoker.MCPServer {
	if len(served) != len(orig) {
		return served
	}
	out := slices.Clone(served)
	for i, s := range orig {
		if s.Server != nil && out[i].Name == s.Name {
			out[i].Server = s.Server
		}
	}
	return out
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
	return s.betweenTurns
}

// holdReply waits, with protoMu held by the caller and released while it
// waits, until the answer to an in-band Go tool call made for the turn ts
// may go to the CLI: at once, unless the CLI was asked to end ts; then
// when ts is over, or the session's tree is reaped. The interrupt is
// written before the calls' contexts are cancelled, but Claude Code reads
// the interrupt and the answer on its own schedule: given the cancelled
// call's error soon after the interrupt, it has been seen to take the
// error, ask the model again and report the turn a success. Held back,
// the answer cannot complete a turn the caller cancelled; Claude Code ends
// the pending call on the interrupt, as it ends its own tools. (Over HTTP
// nothing is held: Codex waits for the answers of its MCP calls before it
// ends an interrupted turn.) A backend that carries Go servers in band
// must end a pending call on the interrupt, or the turn interrupt grace
// passes and the session is stopped.
func (s *session) holdReply(ts *turn) {
	if ts == nil || !ts.interrupted {
		return
	}
	s.protoMu.Unlock()
	defer s.protoMu.Lock()
	select {
	case <-ts.end:
	case <-s.reaped:
	}
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

// callInBand hands one in-band MCP message of the protocol's to the
// session's Go servers, for the turn ts (nil between turns), and writes the
// answer. A tool call's context is the turn's, cancelled when the turn is,
// and its answer, in a turn being interrupted, waits for the turn's end
// (holdReply). Any other message (a handshake, tools/list) belongs to the
// CLI's connection, not to a turn: the CLI keeps a server whose tools/list
// failed without its tools, so the session's context is its own. The caller
// holds protoMu.
func (s *session) callInBand(ts *turn, c MCPCall) {
	if s.tools.bridge == nil {
		s.write(safeLines(func() [][]byte {
			return c.Answer(nil, fmt.Errorf("no Go MCP server named %q in this session", c.Server))
		})...)
		return
	}
	var head struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(c.Message, &head) // the Bridge answers a malformed message
	if head.Method != "tools/call" {
		ts = nil
	}
	ctx := s.betweenTurns
	if ts != nil {
		ctx = ts.ctx
	}
	s.inBand.Add(1)
	go func() {
		defer s.inBand.Done()
		reply, err := s.tools.bridge.Handle(ctx, c.Server, c.Message)
		// Decided and written under protoMu, so that the interrupt is
		// either written after the answer or holds it back.
		s.protoMu.Lock()
		defer s.protoMu.Unlock()
		s.holdReply(ts)
		s.write(safeLines(func() [][]byte { return c.Answer(reply, err) })...)
	}()
}
