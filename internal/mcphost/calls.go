package mcphost

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/detach"
)

// calls tracks the requests a host or bridge is handling: it gives each a
// context it can cancel, records the sessions its clients initialized, and
// lets Close wait until no handler runs.
//
// It reaches the handlers through the context of the connection: the host
// and the bridge put it there (see withCalls), the go-sdk derives every
// handler's context from the connection's, and the middleware installed by
// instrument looks it up.
type calls struct {
	mu       sync.Mutex
	closed   bool
	next     uint64
	inflight map[uint64]context.CancelCauseFunc
	sessions map[*mcp.ServerSession]struct{}
	wg       sync.WaitGroup
	// onPanic and callContext are Options.OnPanic and
	// Options.CallContext.
	onPanic     func(p any, goexit bool)
	callContext func() context.Context
}

func newCalls(opts *Options) *calls {
	if opts == nil {
		opts = &Options{}
	}
	return &calls{
		onPanic:     opts.OnPanic,
		callContext: opts.CallContext,
		inflight:    make(map[uint64]context.CancelCauseFunc),
		sessions:    make(map[*mcp.ServerSession]struct{}),
	}
}

type callsKey struct{}

// withCalls returns ctx carrying c, for the context of a connection.
func withCalls(ctx context.Context, c *calls) context.Context {
	return context.WithValue(ctx, callsKey{}, c)
}

// begin registers a call whose go-sdk context is sdk and returns its
// context and the function that ends it. It fails once c is closed.
//
// The call's context has the values and the deadline of sdk, or, when the
// owner gives the call a context of its own (Options.CallContext), that
// context's deadline and values, then sdk's (the request's id, which
// progress notifications need). It is cancelled by the owner (cancel,
// close, the end of its context), and by the go-sdk (the client's
// notifications/cancelled, the session's end); whichever cancels it, Err
// reads context.DeadlineExceeded once the deadline has passed (see
// package detach).
func (c *calls) begin(sdk context.Context) (context.Context, func(), error) {
	var owner context.Context
	if c.callContext != nil {
		owner = c.callContext() // before c.mu: the owner takes locks of its own
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	var ctx *detach.Context
	stops := make([]func() bool, 0, 2)
	if owner != nil {
		ctx = detach.New(callParent{owner, sdk})
		stops = append(stops, context.AfterFunc(owner, func() { ctx.Cancel(context.Cause(owner)) }))
	} else {
		ctx = detach.New(sdk)
	}
	stops = append(stops, context.AfterFunc(sdk, func() { ctx.Cancel(context.Cause(sdk)) }))
	id := c.next
	c.next++
	c.inflight[id] = ctx.Cancel
	c.wg.Add(1)
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		ctx.Cancel(nil)
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
		c.wg.Done()
	}, nil
}

// callParent gives the context of a call the owner gave a context of its
// own its deadline and values: the owner's, then the go-sdk's.
type callParent struct {
	context.Context // the owner's
	sdk             context.Context
}

func (p callParent) Value(key any) any {
	if v := p.Context.Value(key); v != nil {
		return v
	}
	return p.sdk.Value(key)
}

// cancel cancels the context of every call in progress with cause; calls
// that begin later are not affected.
func (c *calls) cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.inflight {
		cancel(cause)
	}
}

// close refuses new calls, cancels those in progress and returns the
// sessions initialized through c. It does not wait; see wait.
func (c *calls) close() []*mcp.ServerSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, cancel := range c.inflight {
		cancel(ErrClosed)
	}
	sessions := make([]*mcp.ServerSession, 0, len(c.sessions))
	for ss := range c.sessions {
		sessions = append(sessions, ss)
	}
	return sessions
}

// wait returns when no call is in progress. Call it after close.
func (c *calls) wait() { c.wg.Wait() }

// handle runs one incoming request through next with a cancellable context,
// turning a panic (or runtime.Goexit) into an error result.
func (c *calls) handle(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (res mcp.Result, err error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if method == "initialize" {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			c.mu.Lock()
			c.sessions[ss] = struct{}{}
			c.mu.Unlock()
		}
	}
	// The handler runs on a goroutine of its own, so that a handler
	// calling runtime.Goexit (as t.FailNow does) ends only that one: the
	// request still gets a reply, without which the go-sdk would wait
	// for it for ever when the session closes.
	type outcome struct {
		res mcp.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			p := recover() // nil after runtime.Goexit
			if c.onPanic != nil {
				c.onPanic(p, p == nil)
			}
			var o outcome
			o.res, o.err = panicResult(method, req, p)
			done <- o
		}()
		r, e := next(ctx, method, req)
		returned = true
		done <- outcome{r, e}
	}()
	o := <-done
	return o.res, o.err
}

// panicResult is what a request whose handler panicked with p returns: a
// tool error for tools/call, so that the agent sees it and the turn goes on,
// and a JSON-RPC error otherwise.
func panicResult(method string, req mcp.Request, p any) (mcp.Result, error) {
	what := fmt.Sprintf("panicked: %v", p)
	if p == nil {
		what = "called runtime.Goexit"
	}
	if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil {
		res := &mcp.CallToolResult{}
		res.SetError(fmt.Errorf("tool %q %s", ctr.Params.Name, what))
		return res, nil
	}
	return nil, fmt.Errorf("mcphost: %s handler %s", method, what)
}

// middleware is the receiving middleware instrument installs. It acts only
// on connections whose context carries a *calls.
func middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c, ok := ctx.Value(callsKey{}).(*calls)
		if !ok {
			return next(ctx, method, req)
		}
		return c.handle(ctx, method, req, next)
	}
}

// instrumented holds, for each server that carries middleware, the Once
// that installed it.
//
// This is package state, which clinvoke otherwise avoids, because the fact
// it records belongs to the *mcp.Server, not to any host: the go-sdk cannot
// remove a middleware, so installing one per run would stack a layer per run
// on a server the program reuses. Entries are keyed by weak pointers and
// dropped when their server is collected, so the map holds no server alive.
var instrumented sync.Map // weak.Pointer[mcp.Server] → *sync.Once

// instrument installs middleware on s unless it already carries it.
func instrument(s *mcp.Server) {
	key := weak.Make(s)
	v, loaded := instrumented.LoadOrStore(key, new(sync.Once))
	v.(*sync.Once).Do(func() {
		s.AddReceivingMiddleware(middleware)
		if !loaded {
			runtime.AddCleanup(s, func(k weak.Pointer[mcp.Server]) { instrumented.Delete(k) }, key)
		}
	})
}
