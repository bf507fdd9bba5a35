package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Bridge delivers single JSON-RPC messages to a run's MCP servers over
// in-memory connections, for a CLI that carries MCP over its own control
// protocol: Claude Code sends each message for an "SDK MCP server" in a
// control_request of subtype "mcp_message" and expects the reply in the
// control_response. It is made by [NewBridge] and ended by [Bridge.Close].
// Its methods are safe for concurrent use.
//
// Each server gets one connection, opened by the first message for it. The
// CLI's own initialize is the handshake: the Bridge does not make one.
// Claude Code re-initializes a server in some situations; the go-sdk refuses
// a second initialize on a live session, so an initialize on a connection
// that has seen one opens a new connection, and the old one is closed (its
// calls cancelled) in the background.
type Bridge struct {
	servers  map[string]*mcp.Server
	calls    *calls
	maxReply int // Options.MaxReply

	mu      sync.Mutex
	closed  bool
	conns   map[string]*bridgeConn
	retired sync.WaitGroup // connections replaced and being closed

	stopAfter func() bool
	closeOnce sync.Once
}

// NewBridge checks servers as [Serve] does and returns a Bridge for them;
// nothing is connected until a message arrives. When ctx is done the Bridge
// shuts down as [Bridge.Close] does; Close must still be called. opts may
// be nil.
func NewBridge(ctx context.Context, servers map[string]*mcp.Server, opts *Options) (*Bridge, error) {
	if err := validate(ctx, servers); err != nil {
		return nil, err
	}
	b := &Bridge{
		servers: make(map[string]*mcp.Server, len(servers)),
		calls:   newCalls(opts),
		conns:   make(map[string]*bridgeConn),
	}
	if opts != nil {
		b.maxReply = opts.MaxReply
	}
	for name, s := range servers {
		instrument(s)
		b.servers[name] = s
	}
	b.stopAfter = context.AfterFunc(ctx, func() { b.Close() })
	return b, nil
}

// Handle delivers msg, one JSON-RPC message, to the server named server and
// returns the JSON-RPC reply for a request, or nil for a notification or a
// response. It blocks until the server has replied, ctx is done, or the
// Bridge closes; run it on a goroutine of its own if other messages must go
// on meanwhile.
//
// A request the Bridge cannot deliver (no server of that name, an id already
// in flight, a connection that ended) is answered with a JSON-RPC error
// reply, so that the CLI fails that one request; so is one whose reply is
// longer than [Options].MaxReply (a tools/call with a tool error result).
// An error is returned for a message that is not JSON-RPC, for a
// notification that cannot be delivered, after Close
// ([ErrClosed]), and when ctx is done (ctx.Err()); in the last case the
// request is cancelled on the server, as the client's notifications/cancelled
// would, and its id stays in use until the server has answered.
//
// Claude Code expects a control_response for every mcp_message, even one that
// carried a notification: for a nil reply, the caller sends
// {"jsonrpc":"2.0","result":{}}, as the Claude Agent SDKs do.
func (b *Bridge) Handle(ctx context.Context, server string, msg []byte) ([]byte, error) {
	m, err := jsonrpc.DecodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("mcphost: malformed JSON-RPC message: %w", err)
	}
	req, ok := m.(*jsonrpc.Request)
	if !ok {
		// A response: the Bridge answers the servers' requests itself, so
		// there is nothing for one from the CLI to answer.
		return nil, nil
	}
	c, err := b.conn(server, req.Method == "initialize")
	if err != nil {
		if req.IsCall() && err != ErrClosed {
			return errorReply(req.ID, jsonrpc.CodeMethodNotFound, err.Error())
		}
		return nil, err
	}
	if !req.IsCall() {
		return nil, c.conn.Write(ctx, req)
	}
	ch, err := c.expect(req.ID)
	if err != nil {
		code := int64(jsonrpc.CodeInvalidRequest)
		if err == errConnEnded {
			code = jsonrpc.CodeInternalError
		}
		return errorReply(req.ID, code, fmt.Sprintf("mcphost: server %q: %v", server, err))
	}
	if err := c.conn.Write(ctx, req); err != nil {
		c.forget(req.ID)
		return nil, fmt.Errorf("mcphost: server %q: %w", server, err)
	}
	select {
	case resp := <-ch:
		return b.reply(server, req, resp)
	case <-c.done:
		select {
		case resp := <-ch: // answered just before the connection ended
			return b.reply(server, req, resp)
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		c.cancel(req.ID)
		return nil, ctx.Err()
	}
}

// reply encodes resp, the server's answer to req, unless it is longer
// than MaxReply: then it answers req with an error that says so, a tool
// error result for a tools/call, which the agent reads and can act on.
func (b *Bridge) reply(server string, req *jsonrpc.Request, resp *jsonrpc.Response) ([]byte, error) {
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil || b.maxReply <= 0 || len(data) <= b.maxReply {
		return data, err
	}
	msg := fmt.Sprintf("the reply of MCP server %q to %s is %d bytes, more than the %d bytes the run's line limit lets reach the CLI: return less (or raise the limit)",
		server, req.Method, len(data), b.maxReply)
	if req.Method == "tools/call" {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
		return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: mustJSON(res)})
	}
	return errorReply(req.ID, jsonrpc.CodeInternalError, msg)
}

// errorReply encodes a JSON-RPC error response.
func errorReply(id jsonrpc.ID, code int64, message string) ([]byte, error) {
	return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: message}})
}

// conn returns the connection to the named server, opening it if need be,
// and a new one for a handshake on a connection that has had one.
func (b *Bridge) conn(name string, handshake bool) (*bridgeConn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	s, ok := b.servers[name]
	if !ok {
		return nil, fmt.Errorf("mcphost: no server named %q", name)
	}
	c := b.conns[name]
	if c != nil && handshake && c.initialized {
		old := c
		b.retired.Go(old.close)
		c = nil
	}
	if c == nil {
		var err error
		if c, err = b.open(s); err != nil {
			return nil, fmt.Errorf("mcphost: server %q: %w", name, err)
		}
		b.conns[name] = c
	}
	if handshake {
		c.initialized = true
	}
	return c, nil
}

// open connects s to a new in-memory connection and starts reading it.
func (b *Bridge) open(s *mcp.Server) (*bridgeConn, error) {
	st, conn := newMemConns()
	ss, err := s.Connect(withCalls(context.Background(), b.calls), memTransport{st}, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &bridgeConn{
		ss:      ss,
		conn:    conn,
		pending: make(map[jsonrpc.ID]chan *jsonrpc.Response),
		done:    make(chan struct{}),
	}
	go c.read()
	return c, nil
}

// CancelCalls cancels the context of every call in progress, with cause
// [ErrCallCancelled]; later calls are served as usual. The owner calls it
// when the turn that made the calls is cancelled.
func (b *Bridge) CancelCalls() { b.calls.cancel(ErrCallCancelled) }

// Close cancels the context of every call in progress (cause [ErrClosed]),
// ends every connection and returns when no tool handler still runs; Handle
// then returns [ErrClosed]. Close may be called more than once and
// concurrently; every call waits for the shutdown. It always returns nil.
func (b *Bridge) Close() error {
	b.closeOnce.Do(b.shutdown)
	return nil
}

func (b *Bridge) shutdown() {
	b.stopAfter()
	b.mu.Lock()
	b.closed = true
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	b.calls.close()
	for _, c := range conns {
		c.close()
	}
	b.retired.Wait()
	b.calls.wait()
}

// A bridgeConn is the client end of one in-memory connection to a server.
type bridgeConn struct {
	ss          *mcp.ServerSession
	conn        mcp.Connection // the client end
	initialized bool           // an initialize was sent; guarded by Bridge.mu
	done        chan struct{}  // closed when read has returned

	mu      sync.Mutex
	pending map[jsonrpc.ID]chan *jsonrpc.Response // nil once read has returned
}

// errConnEnded is why a request on a connection that has ended fails.
var errConnEnded = errors.New("the connection to the server has ended: the client must initialize it again")

// expect reserves id for a request and returns where its response will
// arrive, or why it cannot: id is in flight, or the connection has ended.
func (c *bridgeConn) expect(id jsonrpc.ID) (<-chan *jsonrpc.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return nil, errConnEnded
	}
	if _, busy := c.pending[id]; busy {
		return nil, fmt.Errorf("request id %v is already in flight", id.Raw())
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.pending[id] = ch
	return ch, nil
}

func (c *bridgeConn) forget(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// cancel tells the server that the request id is cancelled, as a client
// would. The id stays reserved until the server answers.
func (c *bridgeConn) cancel(id jsonrpc.ID) {
	n := &jsonrpc.Request{Method: "notifications/cancelled", Params: mustJSON(mcp.CancelledParams{RequestID: id.Raw(), Reason: "cancelled by the caller"})}
	c.conn.Write(context.Background(), n) // fails only if the connection is gone, and the call with it
}

// read delivers the server's responses to their requests, answers the
// server's own requests, and drops its notifications, until the connection
// ends.
func (c *bridgeConn) read() {
	defer close(c.done)
	defer func() {
		c.mu.Lock()
		c.pending = nil
		c.mu.Unlock()
	}()
	for {
		m, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *jsonrpc.Response:
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case *jsonrpc.Request:
			if m.IsCall() {
				c.conn.Write(context.Background(), answerServer(m))
			}
		}
	}
}

// answerServer answers a request the server sent to its client. Nothing
// carries such requests to the CLI, so all but ping are refused as a client
// without the capability would refuse them, and the server's caller fails at
// once instead of waiting.
func answerServer(req *jsonrpc.Request) *jsonrpc.Response {
	if req.Method == "ping" {
		return &jsonrpc.Response{ID: req.ID, Result: []byte("{}")}
	}
	return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("%s is not supported for servers bridged to the CLI", req.Method),
	}}
}

// close ends the connection: the server's reader sees it end and cancels the
// requests in flight; it returns when the session's handlers have returned.
func (c *bridgeConn) close() {
	c.conn.Close()
	c.ss.Close()
	<-c.done
}

// mustJSON encodes v, which must be encodable.
func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic("mcphost: " + err.Error())
	}
	return data
}
