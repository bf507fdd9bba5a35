package mcphost

import "context"

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
}
