package main

import (
	"context"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pending counts what a shutdown waits for before it closes the sessions:
// the calls read on stdin and not yet answered, or the HTTP POST requests
// in progress (a POST carrying a call ends once the call is answered).
//
// go-sdk v1.8.0 has no way to say "close once the answers are written":
// ServerSession.Close refuses to write the answers of handlers that end
// after it started, and Server.Run with a cancelled context closes the
// session at once. The tool handlers have returned by the time the
// shutdown gets here (mcpadapter.Tools.Shutdown); this covers the moment
// between a handler's return and its answer on the wire.
type pending struct {
	mu   sync.Mutex
	ids  map[any]struct{} // stdio: the ids of the calls not yet answered
	n    int              // HTTP: POST requests in progress
	idle chan struct{}    // closed when nothing is pending; nil then
}

func (p *pending) count() int { return len(p.ids) + p.n }

// changed updates p.idle after a change, under p.mu.
func (p *pending) changed() {
	switch {
	case p.count() > 0 && p.idle == nil:
		p.idle = make(chan struct{})
	case p.count() == 0 && p.idle != nil:
		close(p.idle)
		p.idle = nil
	}
}

// wait returns once nothing is pending, or when ctx is done.
func (p *pending) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		idle := p.idle
		p.mu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// transport returns t with its calls and answers counted.
func (p *pending) transport(t mcp.Transport) mcp.Transport { return &countedTransport{t, p} }

type countedTransport struct {
	mcp.Transport
	p *pending
}

func (t *countedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countedConn{c, t.p}, nil
}

type countedConn struct {
	mcp.Connection
	p *pending
}

func (c *countedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.p.mu.Lock()
		if c.p.ids == nil {
			c.p.ids = map[any]struct{}{}
		}
		c.p.ids[req.ID.Raw()] = struct{}{}
		c.p.changed()
		c.p.mu.Unlock()
	}
	return msg, err
}

func (c *countedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.p.mu.Lock()
		delete(c.p.ids, resp.ID.Raw())
		c.p.changed()
		c.p.mu.Unlock()
	}
	return err
}

// handler returns h with its POST requests counted.
func (p *pending) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.n++
		p.changed()
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.n--
			p.changed()
			p.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}
