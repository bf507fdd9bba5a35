package mcphost

import (
	"context"
	"net/netip"
)

// Options configure a [Host] ([Serve]) or a [Bridge] ([NewBridge]). A nil
// *Options is the zero value.
type Options struct {
	// OnPanic, if not nil, is told of a handler that panics or calls
	// runtime.Goexit, with the panic's value (nil, and goexit set, for
	// Goexit), on the handler's goroutine, before the agent gets a tool
	// error for the call. The run's owner treats it as a panic of its own
	// callbacks.
	OnPanic func(p any, goexit bool)

	// CallContext, if not nil, is asked, as each request to a server
	// begins, for the context the request belongs to: for the run's owner,
	// the turn in progress. The handler's context then has that context's
	// values (before the go-sdk's own) and its deadline, and is cancelled
	// when it is, with its error and cause, besides the other ways a call
	// is cancelled (see the package documentation). A nil result, or a
	// nil CallContext, gives the handler the connection's context alone.
	CallContext func() context.Context

	// MaxReply, if positive, is the longest reply in bytes that a Bridge
	// returns for one request: the run's line limit, as the CLI takes
	// the reply on one line. A longer reply fails that request alone, and
	// says why (a tool error result for tools/call, which the agent
	// reads; a JSON-RPC error for another request); the server goes on
	// serving. Zero means no limit. A Host ignores it: its replies go
	// over HTTP.
	MaxReply int

	// Admit, if not nil, is asked about each connection a Host accepts,
	// with the Host's address and the client's, before anything is read
	// from it; a non-empty answer (why not) closes the connection at once.
	// It runs on the connection's own goroutine, at most four at once,
	// never in the accept loop. With Admit the Host serves one request
	// per connection (no keep-alive), so that every request arrives on a
	// connection Admit was asked about. A Bridge ignores it.
	Admit func(local, remote netip.AddrPort) string
}
