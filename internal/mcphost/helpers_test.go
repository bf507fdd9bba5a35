package mcphost

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type echoOut struct {
	Text string `json:"text"`
}

// testServer is a server with the tools the tests call, and what they saw.
type testServer struct {
	*mcp.Server
	received atomic.Int64  // requests and notifications that reached the server
	inits    atomic.Int64  // initialize requests that reached the server
	started  chan struct{} // a "block" call has started
	causes   chan error    // context.Cause of a "block" call when its context ended
	errs     chan error    // and its Err
	seen     chan callSeen // what an "inspect" call's context holds
	release  chan struct{} // closed by a test to let "block" calls return
}

// ownerKey is the key of a value the tests put in the owner's context
// (Options.CallContext).
type ownerKey struct{}

// callSeen is what the context of an "inspect" call held.
type callSeen struct {
	value       any // the value of ownerKey
	deadline    time.Time
	hasDeadline bool
}

// newTestServer returns a server with tools "echo" (returns its text),
// "block" (waits for its context to end, reports its error and cause, then
// waits for release unless release is nil), "inspect" (reports what its
// context holds) and "boom" (panics).
func newTestServer(t *testing.T, holdAfterCancel bool) *testServer {
	t.Helper()
	ts := &testServer{
		Server:  mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil),
		started: make(chan struct{}, 16),
		causes:  make(chan error, 16),
		errs:    make(chan error, 16),
		seen:    make(chan callSeen, 16),
	}
	if holdAfterCancel {
		ts.release = make(chan struct{})
	}
	ts.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ts.received.Add(1)
			if method == "initialize" {
				ts.inits.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Text: in.Text}, nil
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "block", Description: "Wait for cancellation."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			ts.started <- struct{}{}
			<-ctx.Done()
			ts.errs <- ctx.Err()
			ts.causes <- context.Cause(ctx)
			if ts.release != nil {
				<-ts.release
			}
			return nil, struct{}{}, ctx.Err()
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "inspect", Description: "Report the context."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			d, ok := ctx.Deadline()
			ts.seen <- callSeen{value: ctx.Value(ownerKey{}), deadline: d, hasDeadline: ok}
			return nil, struct{}{}, nil
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "boom", Description: "Panic."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			panic("kaboom")
		})
	return ts
}

// optsOf returns the options given to a helper, or nil.
func optsOf(opts []*Options) *Options {
	if len(opts) == 0 {
		return nil
	}
	return opts[0]
}

// headerTransport adds header to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// httpClient returns a client of its own that sends header, and closes its
// idle connections at cleanup.
func httpClient(t *testing.T, header http.Header) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: headerTransport{base: base, header: header}}
}

// serveTest starts a Host for servers and closes it at cleanup. opts may be
// left out.
func serveTest(t *testing.T, servers map[string]*mcp.Server, opts ...*Options) *Host {
	t.Helper()
	h, err := Serve(t.Context(), servers, optsOf(opts))
	if err != nil {
		t.Fatalf("Serve() error = %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// connectHTTP connects a go-sdk client to url, sending header, and closes the
// session at cleanup.
func connectHTTP(t *testing.T, url string, header http.Header) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient(t, header), MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("Connect(%s) error = %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectDirect connects a go-sdk client to s in memory and closes both ends
// at cleanup.
func connectDirect(t testing.TB, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatalf("Server.Connect() error = %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatalf("Client.Connect() error = %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}
