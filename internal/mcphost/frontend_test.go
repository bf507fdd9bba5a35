package mcphost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A frontEnd is one of the package's two ways of serving tools to a CLI, a
// Bridge or a Host, with a client of it that has completed the handshake.
// The tests of what both do the same way run against each.
type frontEnd interface {
	// CancelCalls and Close are the Bridge's or the Host's own.
	CancelCalls()
	Close() error
	// callBlocked starts a "block" call and waits until its handler runs.
	// The returned channel yields the call's error.
	callBlocked(t *testing.T) <-chan error
	// callEcho calls the "echo" tool and returns the error of the call, or
	// of the reply if the front end answered with a JSON-RPC error.
	callEcho(t *testing.T) error
	// call calls tool with no arguments and returns the error of the call
	// or of the reply.
	call(t *testing.T, tool string) error
	// checkRefusesAfterClose asserts that the closed front end serves no
	// more.
	checkRefusesAfterClose(t *testing.T)
}

// frontEnds lists each front end with a function that serves ts through it
// as "tools" and closes it at cleanup.
var frontEnds = []struct {
	name string
	open func(t *testing.T, ts *testServer, opts ...*Options) frontEnd
}{
	{"bridge", openBridge},
	{"host", openHost},
}

// bridgeEnd is a Bridge that the test passes messages to, as Claude Code
// does for an SDK server.
type bridgeEnd struct {
	*Bridge
	ts *testServer
}

// openBridge serves ts through a Bridge and sends it the handshake.
func openBridge(t *testing.T, ts *testServer, opts ...*Options) frontEnd {
	t.Helper()
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server}, opts...)
	handshake(t, b, "tools")
	return bridgeEnd{Bridge: b, ts: ts}
}

func (e bridgeEnd) callBlocked(t *testing.T) <-chan error {
	t.Helper()
	return callBridgeBlocked(t, e.ts, e.Bridge, context.Background(), 1)
}

func (e bridgeEnd) callEcho(t *testing.T) error {
	t.Helper()
	return e.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
}

func (e bridgeEnd) call(t *testing.T, tool string) error {
	t.Helper()
	return e.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, tool))
}

// send hands msg, a request, to the Bridge and returns the error of the
// call or of its reply.
func (e bridgeEnd) send(t *testing.T, msg string) error {
	t.Helper()
	out, err := e.Handle(t.Context(), "tools", []byte(msg))
	if err != nil {
		return err
	}
	if r := decodeReply(t, out); r.Error != nil {
		return fmt.Errorf("error reply %d: %s", r.Error.Code, r.Error.Message)
	}
	return nil
}

func (e bridgeEnd) checkRefusesAfterClose(t *testing.T) {
	t.Helper()
	if _, err := e.Handle(t.Context(), "tools", []byte(initializeMsg)); !errors.Is(err, ErrClosed) {
		t.Errorf("Handle() after Close error = %v, want ErrClosed", err)
	}
}

// hostEnd is a Host with a go-sdk client connected to it over HTTP.
type hostEnd struct {
	*Host
	ts *testServer
	cs *mcp.ClientSession
}

// openHost serves ts through a Host and connects a client to it.
func openHost(t *testing.T, ts *testServer, opts ...*Options) frontEnd {
	t.Helper()
	h := serveTest(t, map[string]*mcp.Server{"tools": ts.Server}, opts...)
	return hostEnd{Host: h, ts: ts, cs: connectHTTP(t, h.URL("tools"), h.Header())}
}

func (e hostEnd) callBlocked(t *testing.T) <-chan error {
	t.Helper()
	return callBlocked(t, e.ts, e.cs)
}

func (e hostEnd) callEcho(t *testing.T) error {
	_, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
	return err
}

func (e hostEnd) call(t *testing.T, tool string) error {
	_, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	return err
}

func (e hostEnd) checkRefusesAfterClose(t *testing.T) {
	t.Helper()
	conn, err := net.Dial("tcp", e.Addr().String())
	if err == nil {
		conn.Close()
		t.Errorf("Dial(%s) after Close succeeded, want refused", e.Addr())
	}
}

// runWithBlockedCall runs test as a subtest for each front end, with a test
// server (holdAfterCancel as for newTestServer) served through it and a
// "block" call in progress. errc yields the call's error.
func runWithBlockedCall(t *testing.T, holdAfterCancel bool, test func(t *testing.T, ts *testServer, e frontEnd, errc <-chan error)) {
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			ts := newTestServer(t, holdAfterCancel)
			e := fe.open(t, ts)
			test(t, ts, e, e.callBlocked(t))
		})
	}
}

func TestCloseCancelsAndWaitsForHandler(t *testing.T) {
	runWithBlockedCall(t, true, func(t *testing.T, ts *testServer, e frontEnd, errc <-chan error) {
		closed := make(chan struct{})
		go func() {
			e.Close()
			close(closed)
		}()
		if cause := <-ts.causes; !errors.Is(cause, ErrClosed) {
			t.Errorf("handler's context cause = %v, want ErrClosed", cause)
		}
		// The handler has seen the cancellation and is still running.
		select {
		case <-closed:
			t.Fatal("Close returned while a handler was still running")
		default:
		}
		close(ts.release)
		<-closed
		<-errc // the client's call ends too, whatever its error
		e.checkRefusesAfterClose(t)
		if n := countSessions(ts.Server); n != 0 {
			t.Errorf("server has %d sessions after Close, want 0", n)
		}
	})
}

func TestCancelCalls(t *testing.T) {
	runWithBlockedCall(t, false, func(t *testing.T, ts *testServer, e frontEnd, errc <-chan error) {
		e.CancelCalls()
		if cause := <-ts.causes; !errors.Is(cause, ErrCallCancelled) {
			t.Errorf("handler's context cause = %v, want ErrCallCancelled", cause)
		}
		if err := <-errc; err != nil {
			t.Errorf("blocked call error = %v, want the server's reply", err)
		}
		// The front end goes on serving.
		if err := e.callEcho(t); err != nil {
			t.Errorf("echo call after CancelCalls error = %v", err)
		}
	})
}

// With Options.CallContext, a handler's context is the owner's: its values
// and deadline, its cancellation with its error and cause; and the Host's
// and the Bridge's own cancellations still reach it.
func TestCallContext(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			var mu sync.Mutex
			ownerCtx := context.Background()
			owner := func(ctx context.Context) {
				mu.Lock()
				ownerCtx = ctx
				mu.Unlock()
			}
			ts := newTestServer(t, false)
			e := fe.open(t, ts, &Options{CallContext: func() context.Context {
				mu.Lock()
				defer mu.Unlock()
				return ownerCtx
			}})

			base, stop := context.WithDeadline(context.WithValue(context.Background(), ownerKey{}, "turn-1"), deadline)
			defer stop()
			owner(base)
			if err := e.call(t, "inspect"); err != nil {
				t.Fatalf("inspect call: %v", err)
			}
			if got := <-ts.seen; got.value != "turn-1" || !got.hasDeadline || !got.deadline.Equal(deadline) {
				t.Errorf("handler's context holds value %v and deadline %v (%v), want %q and %v", got.value, got.deadline, got.hasDeadline, "turn-1", deadline)
			}

			// The owner's cancellation, with its cause.
			why := errors.New("the turn was interrupted")
			cctx, cancel := context.WithCancelCause(base)
			owner(cctx)
			errc := e.callBlocked(t)
			cancel(why)
			if err, cause := <-ts.errs, <-ts.causes; err != context.Canceled || cause != why {
				t.Errorf("handler's context Err, Cause = %v, %v; want context.Canceled, %v", err, cause, why)
			}
			<-errc

			// The owner's deadline.
			dctx, dcancel := context.WithTimeout(base, time.Millisecond)
			defer dcancel()
			owner(dctx)
			errc = e.callBlocked(t)
			if err := <-ts.errs; err != context.DeadlineExceeded {
				t.Errorf("handler's context Err after the owner's deadline = %v, want context.DeadlineExceeded", err)
			}
			<-ts.causes
			<-errc

			// CancelCalls still cancels a call whose owner's context lives on.
			owner(base)
			errc = e.callBlocked(t)
			e.CancelCalls()
			if cause := <-ts.causes; !errors.Is(cause, ErrCallCancelled) {
				t.Errorf("handler's context cause after CancelCalls = %v, want ErrCallCancelled", cause)
			}
			<-ts.errs
			<-errc
		})
	}
}
