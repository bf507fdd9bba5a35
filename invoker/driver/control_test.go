package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// controlBackend is echoBackend with two-way control: a turn's prompt
// "ask CMD" makes the "CLI" ask permission to run CMD, and the answer
// written back ends the turn with "approved" or "denied: MESSAGE"; a
// prompt "call SERVER TOOL ARGS" sends the MCP messages of one tool call
// in band (for inBand) and ends the turn with the tool's text. The
// protocol records the MCP servers it was given.
type controlBackend struct {
	echoBackend
	got *[]invoker.MCPServer
	// early, if not nil, is set when the answer to a tool call is made
	// after the turn's interrupt and before the turn's end: an answer a
	// CLI could take to go on with a cancelled turn.
	early *atomic.Bool
	// listed, if not nil, makes the CLI list a server's tools as a turn
	// that called one is interrupted (Claude Code may open a server
	// then), and receives the list's outcome.
	listed chan<- error
}

// inBandBackend is controlBackend whose CLI reaches Go servers in band.
type inBandBackend struct{ controlBackend }

func (inBandBackend) InBand(*invoker.SessionRequest) bool { return true }

var (
	_ driver.SessionBackend = controlBackend{}
	_ driver.InBandMCP      = inBandBackend{}
)

// allControl is every capability of two-way control.
var allControl = invoker.Capabilities{Approve: true, GoTools: true, MCPServers: true}

func (b controlBackend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	if b.got != nil {
		*b.got = req.MCPServers
	}
	return &controlProtocol{echoProtocol: echoProtocol{model: req.Model, perm: req.Permission}, early: b.early, listed: b.listed}
}

type controlProtocol struct {
	echoProtocol
	server      string
	pending     string // the tool call to make once the server is initialized
	interrupted bool   // the turn was interrupted: it ends without success
	ended       bool   // the interrupted turn has ended
	early       *atomic.Bool
	listed      chan<- error
}

func (p *controlProtocol) Interrupt() [][]byte {
	p.interrupted, p.ended = true, false
	if p.listed != nil && p.server != "" {
		return append(lines([]string{echoLine("mcp-list", "")}), p.echoProtocol.Interrupt()...)
	}
	return p.echoProtocol.Interrupt()
}

func (p *controlProtocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	p.echoDecoder = echoDecoder{session: p.session}
	p.interrupted = false
	words := strings.Fields(t.Prompt)
	switch {
	case len(words) >= 2 && words[0] == "ask":
		return lines([]string{echoLine("ask", strings.Join(words[1:], " "))}), nil
	case len(words) >= 3 && words[0] == "asks":
		// "asks N CMD": N questions at once, whose answers do not end
		// the turn; only an interrupt does.
		n, _ := strconv.Atoi(words[1])
		var out []string
		for i := range n {
			out = append(out, echoLine("hold", fmt.Sprintf("%s %d", strings.Join(words[2:], " "), i)))
		}
		return lines(out), nil
	case len(words) == 4 && words[0] == "call":
		p.server, p.pending = words[1], words[2]+" "+words[3]
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"echo","version":"1"}}}`
		return lines([]string{echoLine("mcp-init", init)}), nil
	}
	return p.echoProtocol.StartTurn(t)
}

func (p *controlProtocol) Decode(line []byte) (driver.Step, error) {
	var l struct{ T, Text string }
	if json.Unmarshal(line, &l) != nil {
		return p.echoProtocol.Decode(line)
	}
	defer func() {
		if p.interrupted {
			p.done = false
		}
	}()
	raw := func(text string) []byte { return []byte(strings.TrimSpace(echoLine("answer", text))) }
	switch l.T {
	case "ask":
		a := driver.Approval{
			Request: invoker.Approval{Kind: "command", Command: l.Text, Tool: invoker.Tool{Name: "shell", ID: "call-1"}, Raw: line},
			Answer: func(d invoker.Decision) [][]byte {
				if d.Allow {
					return [][]byte{raw("approved")}
				}
				return [][]byte{raw("denied: " + d.Message)}
			},
			// A withdrawn question leaves the end of the turn to the
			// interrupt, as a CLI's does.
			Cancel: func() [][]byte { return lines([]string{echoLine("note", "withdrawn")}) },
		}
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindToolCall, Raw: line}}, Approvals: []driver.Approval{a}}, nil
	case "hold":
		a := driver.Approval{
			Request: invoker.Approval{Kind: "command", Command: l.Text, Tool: invoker.Tool{Name: "shell", ID: l.Text}, Raw: line},
			Answer: func(d invoker.Decision) [][]byte {
				return lines([]string{echoLine("note", fmt.Sprintf("%s: allow %v: %s", l.Text, d.Allow, d.Message))})
			},
		}
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindToolCall, Raw: line}}, Approvals: []driver.Approval{a}}, nil
	case "answer":
		p.text = l.Text
		p.done = !p.interrupted
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindMessage, Text: l.Text, Raw: line}}, TurnEnded: true}, nil
	case "mcp-init":
		// The initialize goes first; its reply is dropped, and the
		// initialized notification follows it.
		return driver.Step{Calls: []driver.MCPCall{{Server: p.server, Message: []byte(l.Text),
			Answer: func(reply []byte, err error) [][]byte {
				return [][]byte{[]byte(strings.TrimSpace(echoLine("mcp-ready", "")))}
			}}}}, nil
	case "mcp-ready":
		return driver.Step{Calls: []driver.MCPCall{{Server: p.server, Message: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
			Answer: func([]byte, error) [][]byte { return lines([]string{echoLine("tool", p.pending)}) }}}}, nil
	case "mcp-list":
		return driver.Step{Calls: []driver.MCPCall{{Server: p.server, Message: []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`),
			Answer: func(reply []byte, err error) [][]byte {
				if err == nil && !bytes.Contains(reply, []byte(`"block"`)) {
					err = fmt.Errorf("tools/list answered %s, want the tools", reply)
				}
				p.listed <- err
				return nil
			}}}}, nil
	case "tool":
		name, args, _ := strings.Cut(l.Text, " ")
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": json.RawMessage(args)}})
		return driver.Step{Calls: []driver.MCPCall{{Server: p.server, Message: msg,
			Answer: func(reply []byte, err error) [][]byte {
				if p.early != nil && p.interrupted && !p.ended {
					p.early.Store(true)
				}
				text := "error: "
				if err != nil {
					text += err.Error()
				} else {
					var r struct {
						Result mcp.CallToolResult `json:"result"`
					}
					json.Unmarshal(reply, &r)
					text = ""
					for _, c := range r.Result.Content {
						if tc, ok := c.(*mcp.TextContent); ok {
							text += tc.Text
						}
					}
				}
				return [][]byte{raw(text)}
			}}}}, nil
	}
	st, err := p.echoProtocol.Decode(line)
	if st.TurnEnded && p.interrupted {
		p.ended = true
	}
	return st, err
}

func openControl(t *testing.T, b driver.SessionBackend, req invoker.SessionRequest) invoker.Session {
	t.Helper()
	inv := driver.New(b, invoker.Options{Binary: "cat"})
	if req.Workdir == "" {
		req.Workdir = t.TempDir()
	}
	s, err := inv.OpenSession(t.Context(), req)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestApprovalDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approve  func(context.Context, invoker.Approval) invoker.Decision
		want     string
		wantKind string
	}{
		{"allow", func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }, "approved", "command"},
		{"deny", func(context.Context, invoker.Approval) invoker.Decision {
			return invoker.Decision{Message: "not on a Friday"}
		}, "denied: not on a Friday", "command"},
		{"no callback", nil, "denied: Denied: the program gave no approval callback.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []invoker.Approval
			var mu sync.Mutex
			approve := tc.approve
			if approve != nil {
				inner := approve
				approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
					mu.Lock()
					seen = append(seen, a)
					mu.Unlock()
					return inner(ctx, a)
				}
			}
			s := openControl(t, controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.SessionRequest{Approve: approve})
			res, err := s.Turn(t.Context(), invoker.TurnRequest{Prompt: "ask touch /tmp/x"})
			if err != nil {
				t.Fatalf("Turn: %v", err)
			}
			if res.Text != tc.want {
				t.Errorf("Text = %q, want %q", res.Text, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.wantKind == "" {
				if len(seen) != 0 {
					t.Errorf("approvals seen = %v, want none", seen)
				}
				return
			}
			if len(seen) != 1 || seen[0].Kind != tc.wantKind || seen[0].Command != "touch /tmp/x" || seen[0].SessionID != "echo-1" || seen[0].Cwd == "" {
				t.Errorf("approvals seen = %+v, want one %s for the command, in session echo-1, with the workdir", seen, tc.wantKind)
			}
		})
	}
}

// The program sees the events of the line that asks (the tool call)
// before the question about it.
func TestApprovalAfterItsEvents(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(what string) {
		mu.Lock()
		order = append(order, what)
		mu.Unlock()
	}
	s := openControl(t, controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.SessionRequest{
		Approve: func(context.Context, invoker.Approval) invoker.Decision {
			note("approve")
			return invoker.Decision{Allow: true}
		}})
	for range 20 {
		mu.Lock()
		order = nil
		mu.Unlock()
		_, err := s.Turn(t.Context(), invoker.TurnRequest{Prompt: "ask ls", OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindToolCall {
				note("tool_call")
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := strings.Join(order, ",")
		mu.Unlock()
		if got != "tool_call,approve" {
			t.Fatalf("order = %s, want the tool call's event before the question", got)
		}
	}
}

// A run with Approve is a session of one turn, whichever its backend's
// router says.
func TestInvokeWithApproveRunsInSession(t *testing.T) {
	inv := driver.New(controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.Options{Binary: "cat"})
	res, err := inv.Invoke(t.Context(), invoker.Request{Prompt: "ask rm -rf /", Workdir: t.TempDir(),
		Approve: func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Message: "no"} }})
	if err != nil || res.Text != "denied: no" {
		t.Fatalf("Invoke = %q, %v; want the denial through the session protocol", res.Text, err)
	}
}

// A callback that blocks until its context is done ends the turn with the
// turn's deadline error; the CLI's question is withdrawn, and Turn returns
// only after the callback has.
func TestApprovalPastDeadline(t *testing.T) {
	returned := make(chan struct{})
	var seen ctxSeen
	s := openControl(t, controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.SessionRequest{
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			defer close(returned)
			seen = seeContext(ctx)
			return invoker.Decision{Allow: true}
		}})
	// Long enough for the CLI to ask on a loaded machine.
	ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), ctxKey{}, "turn value"), 2*time.Second)
	defer cancel()
	res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "ask sleep 1000"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Turn = %q, %v; want the deadline", res.Text, err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("Turn returned before the callback did")
	}
	want, _ := ctx.Deadline()
	if seen.value != "turn value" || !seen.deadline.Equal(want) || seen.err != context.DeadlineExceeded {
		t.Errorf("Approve's context: value %v, deadline %v, Err %v; want %q, %v, context.DeadlineExceeded", seen.value, seen.deadline, seen.err, "turn value", want)
	}
	// The session goes on.
	res, err = s.Turn(t.Context(), invoker.TurnRequest{Prompt: "hello"})
	if err != nil || res.Text != "hello" {
		t.Fatalf("next Turn = %q, %v", res.Text, err)
	}
}

// A panic in Approve is the caller's: the tree is killed and the panic
// re-raised on the goroutine that called Turn.
func TestApprovalPanic(t *testing.T) {
	inv := driver.New(controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.Options{Binary: "cat"})
	var got any
	func() {
		defer func() { got = recover() }()
		inv.Invoke(t.Context(), invoker.Request{Prompt: "ask boom", Workdir: t.TempDir(),
			Approve: func(context.Context, invoker.Approval) invoker.Decision { panic("approve exploded") }})
	}()
	if got != "approve exploded" {
		t.Fatalf("recovered %v, want the callback's panic", got)
	}
}

// newToolServer returns a server with one tool, echo, which reports its
// argument, and block, which waits for its context and records the cause.
func newToolServer(cancelled chan<- error, started chan<- struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "boom"}, func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		panic("tool exploded")
	})
	return s
}

// ctxKey is the key of a value a test puts in a turn's context.
type ctxKey struct{}

// ctxSeen is what a callback saw of its context: the value of ctxKey, the
// deadline, and the error once it was done.
type ctxSeen struct {
	value    any
	deadline time.Time
	err      error
}

// seeContext waits until ctx is done and says what it held.
func seeContext(ctx context.Context) ctxSeen {
	d, _ := ctx.Deadline()
	v := ctx.Value(ctxKey{})
	<-ctx.Done()
	return ctxSeen{value: v, deadline: d, err: ctx.Err()}
}

// newContextServer returns a server with one tool, "context", which
// closes started when it is called, waits until its context is done and
// sends what it held to seen.
func newContextServer(started chan<- struct{}, seen chan<- ctxSeen) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "context"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		close(started)
		seen <- seeContext(ctx)
		return nil, nil, ctx.Err()
	})
	return s
}

// A Go tool handler's context is its turn's: the values and deadline of
// the context Turn was given, and once the deadline has passed (and the
// CLI was asked to end the turn), done with context.DeadlineExceeded; in
// band and over HTTP alike.
func TestGoToolContext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inBand bool
	}{{"in band", true}, {"over HTTP", false}} {
		t.Run(tc.name, func(t *testing.T) {
			seen, started := make(chan ctxSeen, 1), make(chan struct{})
			srv := newContextServer(started, seen)
			var got []invoker.MCPServer
			caps := allControl
			caps.Deltas = true
			var b driver.SessionBackend = controlBackend{echoBackend: echoBackend{caps: caps}, got: &got}
			prompt := `call tools context {}`
			if tc.inBand {
				b = inBandBackend{b.(controlBackend)}
			} else {
				// The turn waits, its first delta out, while the test
				// calls the tool, as the CLI would.
				prompt = "wait"
			}
			s := openControl(t, b, invoker.SessionRequest{Deltas: true, MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
			// The deadline must leave the CLI (in band) or the test's
			// client (over HTTP: a lookup of who connects, the handshake)
			// time to call the tool on a loaded machine.
			ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), ctxKey{}, "turn value"), 2*time.Second)
			defer cancel()
			waiting := make(chan struct{})
			var once sync.Once
			done := make(chan error, 1)
			go func() {
				_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: prompt, OnEvent: func(ev invoker.Event) {
					if ev.Kind == invoker.KindDelta {
						once.Do(func() { close(waiting) })
					}
				}})
				done <- err
			}()
			if !tc.inBand {
				<-waiting
				c := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
				cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: got[0].URL,
					HTTPClient: &http.Client{Transport: headerTransport{got[0].Headers["Authorization"]}}}, nil)
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				defer cs.Close()
				go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "context", Arguments: map[string]any{}})
			}
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("Turn returned (%v) before the tool's handler ran", err)
			}
			got1 := <-seen
			want, _ := ctx.Deadline()
			if got1.value != "turn value" || !got1.deadline.Equal(want) || got1.err != context.DeadlineExceeded {
				t.Errorf("handler's context: value %v, deadline %v, Err %v; want %q, %v, context.DeadlineExceeded", got1.value, got1.deadline, got1.err, "turn value", want)
			}
			if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Turn error = %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

// A panic in a tool handler is the caller's, as one in OnEvent is: the
// tree is killed and the panic re-raised where Invoke was called.
func TestGoToolPanic(t *testing.T) {
	srv := newToolServer(make(chan error, 1), make(chan struct{}, 1))
	inv := driver.New(inBandBackend{controlBackend{echoBackend: echoBackend{caps: allControl}}}, invoker.Options{Binary: "cat"})
	var got any
	func() {
		defer func() { got = recover() }()
		inv.Invoke(t.Context(), invoker.Request{Prompt: `call tools boom {"text":"x"}`, Workdir: t.TempDir(),
			MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	}()
	if got != "tool exploded" {
		t.Fatalf("recovered %v, want the handler's panic", got)
	}
}

func TestGoToolInBand(t *testing.T) {
	cancelled, started := make(chan error, 1), make(chan struct{}, 1)
	srv := newToolServer(cancelled, started)
	var got []invoker.MCPServer
	var early atomic.Bool
	b := inBandBackend{controlBackend{echoBackend: echoBackend{caps: allControl}, got: &got, early: &early}}
	s := openControl(t, b, invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	if len(got) != 1 || got[0].Server != srv {
		t.Fatalf("protocol got %+v, want the Go server as given", got)
	}
	res, err := s.Turn(t.Context(), invoker.TurnRequest{Prompt: `call tools echo {"text":"hi"}`})
	if err != nil || res.Text != "echo: hi" {
		t.Fatalf("Turn = %q, %v; want the tool's result", res.Text, err)
	}

	// A turn cancelled while the handler blocks cancels its context, and
	// the call's answer goes to the CLI only once the turn has ended: it
	// cannot let the CLI go on with the cancelled turn.
	done := cancelBlockedCall(t, s, started)
	if cause := <-cancelled; cause == nil {
		t.Error("the handler's context was not cancelled")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Turn error = %v, want context.Canceled", err)
	}
	if early.Load() {
		t.Error("the cancelled call's answer went to the CLI before the interrupted turn ended")
	}
}

// cancelBlockedCall starts a turn of s that calls the tool "block", cancels
// it once the handler has started, and returns where Turn's error arrives.
func cancelBlockedCall(t *testing.T, s invoker.Session, started <-chan struct{}) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		defer cancel()
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: `call tools block {"text":"x"}`})
		done <- err
	}()
	<-started
	cancel()
	return done
}

// Only a tool call belongs to its turn: a tools/list the CLI sends as the
// turn is interrupted is answered with the tools, not cancelled with the
// turn (Claude Code keeps a server whose list failed without its tools).
func TestGoToolInBandListAtInterrupt(t *testing.T) {
	cancelled, started := make(chan error, 1), make(chan struct{}, 1)
	srv := newToolServer(cancelled, started)
	listed := make(chan error, 1)
	b := inBandBackend{controlBackend{echoBackend: echoBackend{caps: allControl}, listed: listed}}
	s := openControl(t, b, invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	done := cancelBlockedCall(t, s, started)
	<-cancelled
	if err := <-listed; err != nil {
		t.Errorf("tools/list at the interrupt: %v, want the tools", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Turn error = %v, want context.Canceled", err)
	}
}

func TestGoToolOverHTTP(t *testing.T) {
	cancelled, started := make(chan error, 1), make(chan struct{}, 1)
	srv := newToolServer(cancelled, started)
	var got []invoker.MCPServer
	b := controlBackend{echoBackend: echoBackend{caps: allControl}, got: &got}
	s := openControl(t, b, invoker.SessionRequest{MCPServers: []invoker.MCPServer{
		{Name: "tools", Server: srv}, {Name: "other", URL: "https://example.com/mcp"}}})
	// The protocol keeps the Go server beside its URL: it reads its tools.
	if len(got) != 2 || got[0].Server != srv || !strings.HasPrefix(got[0].URL, "http://127.0.0.1:") ||
		!strings.HasPrefix(got[0].Headers["Authorization"], "Bearer ") || got[1].URL != "https://example.com/mcp" || got[1].Server != nil {
		t.Fatalf("protocol got %s, want the Go server as a loopback URL with a bearer token and its Server, the other as given", serversSeen(got))
	}
	url, auth := got[0].URL, got[0].Headers["Authorization"]

	// Without the token the endpoint refuses.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the token: %s, want 401", resp.Status)
	}

	// With it, a client (standing in for the CLI) calls the tool.
	c := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: headerTransport{auth}}}, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || len(r.Content) != 1 || r.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("CallTool = %+v, %v", r, err)
	}

	// Close ends the endpoint.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if resp, err := (&http.Client{Transport: headerTransport{auth}}).Post(url, "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Errorf("the endpoint still answers after Close: %s", resp.Status)
	}
}

// serversSeen describes servers for a failure message without their
// header values: the Go server's bearer token must not reach a test log.
func serversSeen(servers []invoker.MCPServer) string {
	var b strings.Builder
	for i, s := range servers {
		if i > 0 {
			b.WriteString(", ")
		}
		auth := s.Headers["Authorization"]
		if scheme, _, ok := strings.Cut(auth, " "); ok {
			auth = scheme + " <redacted>"
		} else if auth != "" {
			auth = "<redacted>"
		}
		fmt.Fprintf(&b, "{Name:%s URL:%s Authorization:%q Server:%v}", s.Name, s.URL, auth, s.Server != nil)
	}
	return "[" + b.String() + "]"
}

type headerTransport struct{ auth string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.auth)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPServersChecked(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	for _, tc := range []struct {
		name    string
		caps    invoker.Capabilities
		servers []invoker.MCPServer
		want    error
		msg     string
	}{
		{"bad name", allControl, []invoker.MCPServer{{Name: "a b", Command: "x"}}, invoker.ErrInvalidRequest, `contains ' '`},
		{"twice", allControl, []invoker.MCPServer{{Name: "a", Command: "x"}, {Name: "a", URL: "http://h/"}}, invoker.ErrInvalidRequest, "given twice"},
		{"two ways", allControl, []invoker.MCPServer{{Name: "a", Command: "x", URL: "http://h/"}}, invoker.ErrInvalidRequest, "exactly one"},
		{"none", allControl, []invoker.MCPServer{{Name: "a"}}, invoker.ErrInvalidRequest, "exactly one"},
		{"bad url", allControl, []invoker.MCPServer{{Name: "a", URL: "ftp://h/"}}, invoker.ErrInvalidRequest, "not an http"},
		{"env without =", allControl, []invoker.MCPServer{{Name: "a", Command: "x", Env: []string{"OK=1", "s3cret"}}}, invoker.ErrInvalidRequest, `Env[1] has no '='`},
		{"env without key", allControl, []invoker.MCPServer{{Name: "a", Command: "x", Env: []string{"=s3cret"}}}, invoker.ErrInvalidRequest, `Env[0] has an empty key`},
		{"env NUL in value", allControl, []invoker.MCPServer{{Name: "a", Command: "x", Env: []string{"API_KEY=s3cret\x00"}}}, invoker.ErrInvalidRequest, `Env[0] (API_KEY) has a value that holds a NUL byte`},
		{"env NUL in key", allControl, []invoker.MCPServer{{Name: "a", Command: "x", Env: []string{"A\x00B=s3cret"}}}, invoker.ErrInvalidRequest, `Env[0] has a key that holds a NUL byte ("AB")`},
		{"NUL in args", allControl, []invoker.MCPServer{{Name: "a", Command: "x", Args: []string{"--token=s3cret\x00"}}}, invoker.ErrInvalidRequest, `NUL byte`},
		{"bad url with credentials", allControl, []invoker.MCPServer{{Name: "a", URL: "ftp://user:s3cret@h/"}}, invoker.ErrInvalidRequest, "not an http"},
		{"bad header value", allControl, []invoker.MCPServer{{Name: "a", URL: "http://h/", Headers: map[string]string{"Authorization": "Bearer s3cret\n"}}}, invoker.ErrInvalidRequest, `"Authorization" holds a control character`},
		{"bad header", allControl, []invoker.MCPServer{{Name: "a", URL: "http://h/", Headers: map[string]string{"X": "a\nb"}}}, invoker.ErrInvalidRequest, "header"},
		{"go tools unsupported", invoker.Capabilities{MCPServers: true}, []invoker.MCPServer{{Name: "a", Server: srv}}, invoker.ErrUnsupported, "written in Go"},
		{"external unsupported", invoker.Capabilities{GoTools: true}, []invoker.MCPServer{{Name: "a", Command: "x"}}, invoker.ErrUnsupported, "MCPServers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := driver.New(controlBackend{echoBackend: echoBackend{caps: tc.caps}}, invoker.Options{Binary: "cat"})
			res, err := inv.Invoke(t.Context(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), MCPServers: tc.servers})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Invoke error = %v, want %v naming %q", err, tc.want, tc.msg)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Invoke error = %q quotes a secret of the request", err)
			}
			if res.Containment != "" {
				t.Errorf("something started: containment %q", res.Containment)
			}
		})
	}
}

// BenchmarkControlRoundTrip measures the engine's part of two-way control
// on the echo CLI, where the CLI itself costs next to nothing: a turn that
// asks one approval (request seen → callback → answer written → echoed)
// and a turn that calls one Go tool in band (initialize, initialized,
// tools/call through the bridge), each against a plain turn of the same
// session, back to back in every iteration.
func BenchmarkControlRoundTrip(b *testing.B) {
	allow := func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
	srv := newToolServer(make(chan error, 1), make(chan struct{}, 1))
	inv := driver.New(inBandBackend{controlBackend{echoBackend: echoBackend{caps: allControl}}}, invoker.Options{Binary: "cat"})
	s, err := inv.OpenSession(b.Context(), invoker.SessionRequest{Workdir: b.TempDir(), Approve: allow,
		MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	turn := func(prompt, want string) time.Duration {
		start := time.Now()
		res, err := s.Turn(b.Context(), invoker.TurnRequest{Prompt: prompt})
		if err != nil || res.Text != want {
			b.Fatalf("Turn(%q) = %q, %v", prompt, res.Text, err)
		}
		return time.Since(start)
	}
	var plain, ask, tool time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			plain += turn("hello", "hello")
			ask += turn("ask touch x", "approved")
		} else {
			ask += turn("ask touch x", "approved")
			plain += turn("hello", "hello")
		}
		tool += turn(`call tools echo {"text":"hi"}`, "echo: hi")
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
	b.ReportMetric(ms(plain), "plain-turn-ms")
	b.ReportMetric(ms(ask), "approval-turn-ms")
	b.ReportMetric(ms(tool), "gotool-turn-ms")
	b.ReportMetric(ms(ask-plain), "approval-added-ms")
	b.ReportMetric(ms(tool-plain), "gotool-added-ms")
}

// runGoexit runs f on a goroutine of its own and reports whether f called
// runtime.Goexit (rather than returning or panicking).
func runGoexit(f func()) (goexit bool) {
	done := make(chan bool, 1)
	go func() {
		returned := false
		defer func() {
			if !returned && recover() == nil {
				done <- true
				return
			}
			done <- false
		}()
		f()
		returned = true
	}()
	return <-done
}

// A tool handler that calls runtime.Goexit (as t.FailNow does) neither
// hangs the run nor is lost: Invoke calls runtime.Goexit too, once the
// tree is gone.
func TestGoToolGoexit(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "exit"}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		runtime.Goexit()
		return nil, nil, nil
	})
	for _, tc := range []struct {
		name string
		b    driver.SessionBackend
	}{
		{"in band", inBandBackend{controlBackend{echoBackend: echoBackend{caps: allControl}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := driver.New(tc.b, invoker.Options{Binary: "cat"})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			goexit := runGoexit(func() {
				inv.Invoke(ctx, invoker.Request{Prompt: `call tools exit {"text":"x"}`, Workdir: t.TempDir(),
					MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
			})
			if !goexit {
				t.Fatal("Invoke did not call runtime.Goexit after the handler did")
			}
		})
	}
}

// A panic of Approve after the turn's end was seen (a callback woken by
// the turn's deadline) is re-raised by Turn all the same.
func TestApprovalPanicAfterTurnEnd(t *testing.T) {
	s := openControl(t, controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.SessionRequest{
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			<-ctx.Done()
			panic("late")
		}})
	// Long enough for the CLI to ask on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var got any
	func() {
		defer func() { got = recover() }()
		s.Turn(ctx, invoker.TurnRequest{Prompt: "ask ls"})
	}()
	if got != "late" {
		t.Fatalf("recovered %v, want the callback's panic", got)
	}
	<-s.Done()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "Approve panicked: late") {
		t.Errorf("Err() = %v, want the panic named", err)
	}
}

// A tool handler's panic between turns ends the session, and Err says
// why.
func TestGoToolPanicBetweenTurns(t *testing.T) {
	srv := newToolServer(make(chan error, 1), make(chan struct{}, 1))
	var got []invoker.MCPServer
	s := openControl(t, controlBackend{echoBackend: echoBackend{caps: allControl}, got: &got}, invoker.SessionRequest{
		MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	c := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: got[0].URL,
		HTTPClient: &http.Client{Transport: headerTransport{got[0].Headers["Authorization"]}}}, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "boom", Arguments: map[string]any{"text": "x"}})
	<-s.Done()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "tool exploded") {
		t.Errorf("Err() = %v, want the handler's panic named", err)
	}
}

// The time a callback takes to decide is not the CLI's silence: an idle
// timeout shorter than the decision does not end the turn.
func TestIdleTimeoutSparesApproval(t *testing.T) {
	inv := driver.New(controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.Options{Binary: "cat", IdleTimeout: 50 * time.Millisecond})
	res, err := inv.Invoke(t.Context(), invoker.Request{Prompt: "ask ls", Workdir: t.TempDir(),
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			select { // a person who takes a while
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			return invoker.Decision{Allow: true}
		}})
	if err != nil || res.Text != "approved" {
		t.Fatalf("Invoke = %q, %v; want the approval to outlast the idle timeout", res.Text, err)
	}
}

// heldQuestions asks n questions at once in one turn of a fresh session,
// with an Approve that holds each until the turn's context is done, and
// calls measure once every question was either given to Approve or
// refused (the KindWarning events whose text starts with refusedPrefix);
// then it ends the turn by cancelling its context. It returns how many
// questions Approve got, and the refusals' warnings.
func heldQuestions(tb testing.TB, n int, measure func()) (asked int, refusals []invoker.Event) {
	tb.Helper()
	var mu sync.Mutex
	progress := make(chan struct{}, 1)
	note := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	inv := driver.New(controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.Options{Binary: "cat"})
	s, err := inv.OpenSession(tb.Context(), invoker.SessionRequest{Workdir: tb.TempDir(),
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			mu.Lock()
			asked++
			mu.Unlock()
			note()
			<-ctx.Done()
			return invoker.Decision{Allow: true}
		}})
	if err != nil {
		tb.Fatalf("OpenSession: %v", err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: fmt.Sprintf("asks %d rm -rf", n), OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning && strings.HasPrefix(ev.Text, refusedPrefix) {
				mu.Lock()
				refusals = append(refusals, ev)
				mu.Unlock()
				note()
			}
		}})
		done <- err
	}()
	timeout := time.After(time.Minute)
	for {
		mu.Lock()
		seen := asked + len(refusals)
		mu.Unlock()
		if seen >= n {
			break
		}
		select {
		case <-progress:
		case err := <-done:
			tb.Fatalf("Turn returned %v before the %d questions were asked (%d were)", err, n, seen)
		case <-timeout:
			tb.Fatalf("after a minute, %d of the %d questions were asked or refused", seen, n)
		}
	}
	measure()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		tb.Errorf("Turn error = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return asked, refusals
}

// refusedPrefix starts the warning of a question refused without asking
// because too many wait for Approve.
const refusedPrefix = "refused without asking Approve"

// A CLI that asks without end cannot make the program hold more than the
// cap of questions per turn, at one goroutine each: the others are denied
// at once, with a warning to the program and a message to the model.
func TestHeldQuestionsBounded(t *testing.T) {
	const n = 1000
	before := runtime.NumGoroutine()
	var held int
	asked, refusals := heldQuestions(t, n, func() { held = runtime.NumGoroutine() - before })
	t.Logf("%d questions held until the turn's end: %d goroutines more than before the session", n, held)
	const max = driver.MaxPendingApprovals
	if asked != max {
		t.Errorf("Approve was called %d times, want %d (the cap)", asked, max)
	}
	if len(refusals) != n-max {
		t.Errorf("%d refusals reported, want %d", len(refusals), n-max)
	} else if ev := refusals[0]; !strings.Contains(ev.Text, strconv.Itoa(max)) || len(ev.Raw) == 0 || ev.Tool == nil || ev.Tool.Name != "shell" {
		t.Errorf("refusal = %+v, want the cap named, the tool call in Tool and the CLI's request in Raw", ev)
	}
	// The session itself (reader, writer, waiters) costs a few; each
	// question held may cost one.
	if held > max+20 {
		t.Errorf("%d goroutines while %d questions were held, want at most %d (one per question under the cap, and the session's)", held, n, max+20)
	}
}

// BenchmarkHeldQuestions measures what holding many questions costs: the
// goroutines, and the heap and goroutine stacks in use, while 10,000
// questions of one turn are pending, against the program before the
// session opened.
func BenchmarkHeldQuestions(b *testing.B) {
	const n = 10000
	mem := func() (heap, stack int64) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc), int64(m.StackInuse)
	}
	for b.Loop() {
		g0 := runtime.NumGoroutine()
		h0, s0 := mem()
		var g, h, s int64
		heldQuestions(b, n, func() {
			g = int64(runtime.NumGoroutine() - g0)
			h, s = mem()
			h, s = h-h0, s-s0
		})
		b.ReportMetric(float64(g), "goroutines-held")
		b.ReportMetric(float64(h)/(1<<20), "heap-MiB-held")
		b.ReportMetric(float64(s)/(1<<20), "stack-MiB-held")
	}
}

// An answer to a question, decided before the turn was interrupted,
// reaches the CLI before the interrupt: here the CLI ends the turn with
// the answer, and the interrupt comes after it.
func TestApprovalAnswerBeforeInterrupt(t *testing.T) {
	answered := newPause()
	inv := driver.OnAnswered(driver.New(controlBackend{echoBackend: echoBackend{caps: allControl}}, invoker.Options{Binary: "cat"}), answered.hook)
	s := openOn(t, inv, invoker.SessionRequest{
		Approve: func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "ask touch /tmp/x", OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				select {
				case first <- ev.Text:
				default:
				}
			}
		}})
		done <- err
	}()
	<-answered.reached
	cancel()
	got := <-first
	close(answered.resume)
	<-done
	if got != "approved" {
		t.Errorf("the turn's first message = %q, want approved (the answer before the interrupt)", got)
	}
}
