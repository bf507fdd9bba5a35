package mcpadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// stub is an invoker.Invoker whose Invoke runs fn. It counts calls and
// records every Request it receives.
type stub struct {
	invokeOnly
	name  string
	fn    func(ctx context.Context, req invoker.Request) (*invoker.Result, error)
	calls atomic.Int64

	mu   sync.Mutex
	reqs []invoker.Request
}

var _ invoker.Invoker = (*stub)(nil)

func (s *stub) Name() string { return s.name }

func (s *stub) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	s.calls.Add(1)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.fn(ctx, req)
}

func (s *stub) lastRequest(t *testing.T) invoker.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the invoker was not called")
	}
	return s.reqs[len(s.reqs)-1]
}

// answer returns a stub that answers "echo: PROMPT" at once.
func answer(name string) *stub {
	return &stub{name: name, fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		return &invoker.Result{
			SessionID: "sess-" + name,
			Text:      "echo: " + req.Prompt,
			Usage:     invoker.Usage{InputTokens: 10, OutputTokens: 5},
		}, nil
	}}
}

// blocker is a stub that answers a prompt starting with "answer:" at once,
// and for any other prompt reports each run's start on started, then blocks
// until its context is done, reports that on cancelled, and returns a
// partial result with the context's error.
type blocker struct {
	*stub
	started   chan invoker.Request
	cancelled chan error
}

func newBlocker(name string) *blocker {
	b := &blocker{started: make(chan invoker.Request, 100), cancelled: make(chan error, 100)}
	b.stub = &stub{name: name, fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		if strings.HasPrefix(req.Prompt, "answer:") {
			return &invoker.Result{Text: "echo: " + req.Prompt}, nil
		}
		if req.OnEvent != nil {
			req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "sess-blocked"})
		}
		b.started <- req
		<-ctx.Done()
		b.cancelled <- context.Cause(ctx)
		return &invoker.Result{SessionID: "sess-blocked", Text: "partial", ExitCode: -1}, ctx.Err()
	}}
	return b
}

// harness is a server with the adapter's tools and one client session,
// connected over in-memory transports.
type harness struct {
	server   *mcp.Server
	tools    *mcpadapter.Tools
	ss       *mcp.ServerSession
	cs       *mcp.ClientSession
	progress chan *mcp.ProgressNotificationParams // every notification the client receives
	sent     atomic.Int64                         // notifications/progress sent by the server
	abandons atomic.Bool                          // see abandon
}

// abandon declares that the test cancels calls on the client side. The
// client forgets a cancelled call at once, while the server answers it when
// its handler returns (the SDK always writes a response); if the client has
// closed the connection by then, the write fails and the server session's
// Wait reports io.ErrClosedPipe. That error, and only that one, is then
// expected at teardown.
func (h *harness) abandon() { h.abandons.Store(true) }

// newHarness registers invokers with opts on a new server and connects a
// client. Teardown is structured: the cleanups run in reverse order of
// opening, so the client session is closed before the server session is
// awaited, and the tools are shut down last, which checks that every call
// and warm session ended; each checks its error.
func newHarness(t *testing.T, opts *mcpadapter.Options, invokers ...invoker.Invoker) *harness {
	t.Helper()
	return newHarnessWith(t, harnessClient{}, opts, invokers...)
}

// harnessClient is what a test changes about the harness's client.
type harnessClient struct {
	// elicit, if not nil, answers elicitations: the client declares
	// elicitation.
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	// protocol is the protocol version the client asks for; "" means
	// the SDK's latest.
	protocol string
}

// newHarnessWith is newHarness with a client configured by hc.
func newHarnessWith(t *testing.T, hc harnessClient, opts *mcpadapter.Options, invokers ...invoker.Invoker) *harness {
	t.Helper()
	h := &harness{progress: make(chan *mcp.ProgressNotificationParams, 1000)}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(h.server, opts, invokers...)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	h.tools = tools
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v with %d calls in progress", err, tools.Active())
		}
	})
	h.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/progress" {
				h.sent.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := h.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("Server.Connect() error = %v", err)
	}
	h.ss = ss
	t.Cleanup(func() {
		err := ss.Wait()
		if h.abandons.Load() && errors.Is(err, io.ErrClosedPipe) {
			// The server answered a call the client had cancelled after
			// the client closed the connection; expected, see abandon.
			err = nil
		}
		if err != nil {
			t.Errorf("ServerSession.Wait() error = %v", err)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case h.progress <- req.Params:
			default:
			}
		},
		ElicitationHandler: hc.elicit,
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: hc.protocol})
	if err != nil {
		t.Fatalf("Client.Connect() error = %v", err)
	}
	h.cs = cs
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
	})
	return h
}

// call calls tool with args and returns the result and its structured
// output decoded into out (if not nil).
func (h *harness) call(ctx context.Context, t *testing.T, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s) error = %v", tool, err)
	}
	if out != nil {
		decode(t, res, out)
	}
	return res
}

func decode(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func args(prompt, workdir string, kv ...any) map[string]any {
	m := map[string]any{"prompt": prompt, "workdir": workdir}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// invokeOnly gives a test's Invoker the methods its tests do not use:
// every optional Request field declared, and no session mode.
type invokeOnly struct{}

func (invokeOnly) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Fork: true, Images: true, SystemPrompt: true,
		OutputSchema: true, MaxTurns: true, MaxBudget: true}
}

func (invokeOnly) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}
