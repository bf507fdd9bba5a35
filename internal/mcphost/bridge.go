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
// The messages carry no mark of the client that sent them, and Claude Code
// connects to each SDK server more than once at the same time (two clients,
// each numbering its requests from 0), so the Bridge serves every client of
// a server on one connection: the CLI's first initialize is the handshake
// (the Bridge does not make one), a later initialize is answered with the
// first one's result and its notifications/initialized is not passed on,
// and each request goes to the server under an id of the Bridge's own, its
// reply carrying the id the CLI gave it. A notifications/cancelled reaches
// every request in flight that the CLI gave the id it names.
type Bridge struct {
	servers  map[string]*mcp.Server
	calls    *calls
	maxReply int // Options.MaxReply

	mu      sync.Mutex
	closed  bool
	conns   map[string]*bridgeConn
	retired sync.WaitGroup // connections that ended, being closed

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
// on meanwhile. Requests may be in flight at once under the same id.
//
// A request the Bridge cannot deliver (no server of that name, a request
// other than initialize on a connection that ended) is answered with a
// JSON-RPC error reply, so that the CLI fails that one request; so is one
// whose reply is longer than [Options].MaxReply (a tools/call with a tool
// error result). An error is returned for a message that is not JSON-RPC,
// for a notification that cannot be delivered, after Close ([ErrClosed]),
// and when ctx is done (ctx.Err()); in the last case the request is
// cancelled on the server, as the client's notifications/cancelled would.
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
		return nil, c.notify(ctx, req)
	}
	if req.Method == "initialize" {
		return b.initialize(ctx, server, c, req)
	}
	ch, id, err := c.expect(req.ID, nil)
	if err != nil {
		return errorReply(req.ID, jsonrpc.CodeInternalError, fmt.Sprintf("mcphost: server %q: %v", server, err))
	}
	resp, err := c.send(ctx, req, ch, id)
	if err != nil {
		return nil, fmt.Errorf("mcphost: server %q: %w", server, err)
	}
	return b.reply(server, req, resp)
}

// initialize answers req, an initialize of the CLI's, with the result of
// the connection's handshake: the first initialize is sent to the server,
// and every other waits for its result. A refused handshake is not kept:
// the next initialize is sent.
func (b *Bridge) initialize(ctx context.Context, server string, c *bridgeConn, req *jsonrpc.Request) ([]byte, error) {
	for {
		h, first := c.initReply()
		if first {
			_, id, err := c.expect(req.ID, h) // the reader ends h with the response
			if err != nil {
				h.end(nil)
				return errorReply(req.ID, jsonrpc.CodeInternalError, fmt.Sprintf("mcphost: server %q: %v", server, err))
			}
			if err := c.write(ctx, req, id); err != nil {
				c.forget(id)
				h.end(nil)
				return nil, fmt.Errorf("mcphost: server %q: %w", server, err)
			}
		}
		select {
		case <-h.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch {
		case h.resp == nil:
			select {
			case <-c.done: // as for any request in flight when it ends
				return nil, fmt.Errorf("mcphost: server %q: %w", server, ErrClosed)
			default:
				continue // the first one's sender gave up: send this one
			}
		case h.resp.Error != nil && !first:
			continue // refused: this one is sent on its own
		}
		resp := *h.resp
		resp.ID = req.ID
		return b.reply(server, req, &resp)
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
// and a new one for a handshake on a connection that has ended.
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
	if c != nil && handshake && c.ended() {
		b.retired.Go(c.close)
		c = nil
	}
	if c == nil {
		var err error
		if c, err = b.open(s); err != nil {
			return nil, fmt.Errorf("mcphost: server %q: %w", name, err)
		}
		b.conns[name] = c
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
		pending: make(map[int64]*bridgeCall),
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

// A bridgeConn is the client end of one in-memory connection to a server,
// shared by every client of the CLI's.
type bridgeConn struct {
	ss   *mcp.ServerSession
	conn mcp.Connection // the client end
	done chan struct{}  // closed when read has returned

	mu          sync.Mutex
	next        int64                 // the id of the next request sent
	pending     map[int64]*bridgeCall // by the id sent; nil once read has returned
	hs          *initReply            // the first initialize, nil until one is sent or after a refusal
	initialized bool                  // notifications/initialized was passed on
}

// A bridgeCall is a request of the CLI's in flight on a connection.
type bridgeCall struct {
	id jsonrpc.ID             // the id the CLI gave it
	ch chan *jsonrpc.Response // where its response goes
	hs *initReply             // the handshake it makes, for an initialize
}

// An initReply is the answer to the connection's first initialize; done is closed once
// resp, its response, is known (nil if none came).
type initReply struct {
	done chan struct{}
	resp *jsonrpc.Response
	once sync.Once
}

func (h *initReply) end(resp *jsonrpc.Response) {
	h.once.Do(func() {
		h.resp = resp
		close(h.done)
	})
}

// errConnEnded is why a request on a connection that has ended fails.
var errConnEnded = errors.New("the connection to the server has ended: the client must initialize it again")

func (c *bridgeConn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// initReply returns the answer to the connection's handshake, and whether
// the caller makes the handshake: true if there was none, or the last one failed.
func (c *bridgeConn) initReply() (*initReply, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.hs; h != nil {
		select {
		case <-h.done:
			if h.resp != nil && h.resp.Error == nil {
				return h, false
			}
		default:
			return h, false
		}
	}
	c.hs = &initReply{done: make(chan struct{})}
	return c.hs, true
}

// expect reserves an id of the connection's for a request the CLI gave id
// and returns it, with where its response will arrive, or why it cannot:
// the connection has ended. hs is the handshake the request makes, if it
// is an initialize.
func (c *bridgeConn) expect(id jsonrpc.ID, hs *initReply) (<-chan *jsonrpc.Response, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return nil, 0, errConnEnded
	}
	c.next++
	ch := make(chan *jsonrpc.Response, 1)
	c.pending[c.next] = &bridgeCall{id: id, ch: ch, hs: hs}
	return ch, c.next, nil
}

func (c *bridgeConn) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// write sends req to the server under the connection's id.
func (c *bridgeConn) write(ctx context.Context, req *jsonrpc.Request, id int64) error {
	sent := *req
	sent.ID = wireID(id)
	return c.conn.Write(ctx, &sent)
}

// send sends req under id, reserved by expect with ch, and returns the
// server's response with the CLI's id. When ctx is done first the request
// is cancelled on the server and ctx.Err() returned.
func (c *bridgeConn) send(ctx context.Context, req *jsonrpc.Request, ch <-chan *jsonrpc.Response, id int64) (*jsonrpc.Response, error) {
	if err := c.write(ctx, req, id); err != nil {
		c.forget(id)
		return nil, err
	}
	var resp *jsonrpc.Response
	select {
	case resp = <-ch:
	case <-c.done:
		select {
		case resp = <-ch: // answered just before the connection ended
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		c.cancel(id, "cancelled by the caller")
		return nil, ctx.Err()
	}
	out := *resp
	out.ID = req.ID
	return &out, nil
}

// wireID is the JSON-RPC id of the connection's request id.
func wireID(id int64) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(float64(id)) // a float64 is always an id
	return v
}

// notify passes a notification of the CLI's on: notifications/initialized
// once per connection, notifications/cancelled to each request in flight
// under the id it names, any other as it is.
func (c *bridgeConn) notify(ctx context.Context, n *jsonrpc.Request) error {
	switch n.Method {
	case "notifications/initialized":
		c.mu.Lock()
		again := c.initialized
		c.initialized = true
		c.mu.Unlock()
		if again {
			return nil
		}
	case "notifications/cancelled":
		var p mcp.CancelledParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			return fmt.Errorf("mcphost: malformed notifications/cancelled: %w", err)
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return fmt.Errorf("mcphost: notifications/cancelled: %w", err)
		}
		for _, sent := range c.inFlight(id) {
			c.cancel(sent, p.Reason)
		}
		return nil
	}
	return c.conn.Write(ctx, n)
}

// inFlight returns the ids the connection sent the requests in flight the
// CLI gave id under, but an initialize, which is never cancelled.
func (c *bridgeConn) inFlight(id jsonrpc.ID) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int64
	for sent, call := range c.pending {
		if call.id == id && call.hs == nil {
			ids = append(ids, sent)
		}
	}
	return ids
}

// cancel tells the server that the request it got under id is cancelled,
// for reason, as a client would. The id stays reserved until the server
// answers.
func (c *bridgeConn) cancel(id int64, reason string) {
	n := &jsonrpc.Request{Method: "notifications/cancelled", Params: mustJSON(mcp.CancelledParams{RequestID: id, Reason: reason})}
	c.conn.Write(context.Background(), n) // fails only if the connection is gone, and the call with it
}

// read delivers the server's responses to their requests, answers the
// server's own requests, and drops its notifications, until the connection
// ends.
func (c *bridgeConn) read() {
	defer close(c.done)
	defer func() {
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, call := range pending {
			if call.hs != nil {
				call.hs.end(nil)
			}
		}
	}()
	for {
		m, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *jsonrpc.Response:
			id, _ := m.ID.Raw().(int64)
			c.mu.Lock()
			call := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if call == nil {
				continue
			}
			if call.hs != nil {
				call.hs.end(m)
			}
			call.ch <- m
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
