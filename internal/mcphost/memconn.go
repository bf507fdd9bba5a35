package mcphost

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A memConn is one end of an in-memory connection that carries JSON-RPC
// messages as values, for the Bridge.
//
// The go-sdk's own in-memory transport frames messages as lines over a
// pipe, and its reader stops for good at a line over its limit (16 MiB,
// mcp.DefaultMaxLineLength): a tool's larger result closed the
// connection, the call failed as closed, and every later call to that
// server was refused. A memConn has no limit and nothing to stop: the
// Bridge bounds what it hands the CLI itself (Options.MaxReply), and a
// reply over it fails that request alone.
//
// Both ends share one closed channel: closing either ends the connection
// for both, as closing one end of a pipe does. A message is handed over
// only when the other end reads it, so none is lost in between.
type memConn struct {
	in     <-chan jsonrpc.Message
	out    chan<- jsonrpc.Message
	closed chan struct{}
	once   *sync.Once
}

// newMemConns returns the two ends of a new connection.
func newMemConns() (*memConn, *memConn) {
	ab, ba := make(chan jsonrpc.Message), make(chan jsonrpc.Message)
	closed, once := make(chan struct{}), new(sync.Once)
	return &memConn{in: ba, out: ab, closed: closed, once: once},
		&memConn{in: ab, out: ba, closed: closed, once: once}
}

// Read returns the next message from the other end; io.EOF once the
// connection is closed.
func (c *memConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write hands m to the other end, once it reads it.
func (c *memConn) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	select {
	case c.out <- m:
		return nil
	case <-c.closed:
		return mcp.ErrConnectionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the connection for both ends.
func (c *memConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *memConn) SessionID() string { return "" }

// memTransport connects a server to one end of a memConn.
type memTransport struct{ conn *memConn }

func (t memTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }
