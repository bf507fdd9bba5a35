package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	initializeMsg  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2"}}}`
	initializedMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// newTestBridge returns a Bridge for servers and closes it at cleanup. opts
// may be left out.
func newTestBridge(t *testing.T, servers map[string]*mcp.Server, opts ...*Options) *Bridge {
	t.Helper()
	b, err := NewBridge(t.Context(), servers, optsOf(opts))
	if err != nil {
		t.Fatalf("NewBridge() error = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// reply is a decoded JSON-RPC response.
type reply struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// handle sends msg to server through b and decodes the reply.
func handle(t *testing.T, b *Bridge, server, msg string) reply {
	t.Helper()
	out, err := b.Handle(t.Context(), server, []byte(msg))
	if err != nil {
		t.Fatalf("Handle(%s) error = %v", msg, err)
	}
	return decodeReply(t, out)
}

// decodeReply decodes out, a reply from Handle.
func decodeReply(t *testing.T, out []byte) reply {
	t.Helper()
	var r reply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("Handle() reply %q: %v", out, err)
	}
	return r
}

// handshake sends the messages Claude Code opens an SDK server with.
func handshake(t *testing.T, b *Bridge, server string) reply {
	t.Helper()
	r := handle(t, b, server, initializeMsg)
	out, err := b.Handle(t.Context(), server, []byte(initializedMsg))
	if err != nil || out != nil {
		t.Fatalf("Handle(initialized) = %q, %v, want nil, nil", out, err)
	}
	return r
}

// rawDirect connects to s in memory without a go-sdk client and returns a
// function that sends one message and returns the reply, as the go-sdk
// encodes it, for requests.
func rawDirect(t *testing.T, s *mcp.Server) func(msg string) []byte {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ss.Close()
	})
	return func(msg string) []byte {
		t.Helper()
		m, err := jsonrpc.DecodeMessage([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		if req := m.(*jsonrpc.Request); !req.IsCall() {
			return nil
		}
		resp, err := conn.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

func TestBridgeAnswersAsDirectClient(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	direct := rawDirect(t, ts.Server)
	// What Claude Code sends to an SDK server, in order.
	msgs := []struct{ name, msg string }{
		{"initialize", initializeMsg},
		{"notifications/initialized", initializedMsg},
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`},
		{"tools/call", `{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`},
		{"tools/call with bad arguments", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":7}}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":{}}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":5,"method":"no/such","params":{}}`},
		{"ping", `{"jsonrpc":"2.0","id":6,"method":"ping"}`},
	}
	for _, m := range msgs {
		got, err := b.Handle(t.Context(), "tools", []byte(m.msg))
		if err != nil {
			t.Fatalf("%s: Handle() error = %v", m.name, err)
		}
		if want := direct(m.msg); string(got) != string(want) {
			t.Errorf("%s: Handle() =\n%s\nwant (direct)\n%s", m.name, got, want)
		}
	}
	// A panic is the one answer that differs: directly, it would crash.
	r := handle(t, b, "tools", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"boom","arguments":{}}}`)
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(textOf(t, &res), "kaboom") {
		t.Errorf("boom reply = %s, want a tool error naming the panic", r.Result)
	}
}

func TestBridgeRefusals(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	handshake(t, b, "tools")
	tests := []struct {
		name, server, msg string
		code              int
		wantErr           bool
	}{
		{name: "unknown server", server: "other", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, code: -32601},
		{name: "notification to unknown server", server: "other", msg: initializedMsg, wantErr: true},
		{name: "not JSON-RPC", server: "tools", msg: `{"hello":1}`, wantErr: true},
		{name: "not JSON", server: "tools", msg: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := b.Handle(t.Context(), tt.server, []byte(tt.msg))
			if tt.wantErr {
				if err == nil {
					t.Errorf("Handle() = %s, nil; want an error", out)
				}
				return
			}
			var r reply
			json.Unmarshal(out, &r)
			if err != nil || r.Error == nil || r.Error.Code != tt.code {
				t.Errorf("Handle() = %s, %v; want error reply %d", out, err, tt.code)
			}
		})
	}
	// A response from the CLI needs no reply.
	if out, err := b.Handle(t.Context(), "tools", []byte(`{"jsonrpc":"2.0","id":9,"result":{}}`)); out != nil || err != nil {
		t.Errorf("Handle(response) = %s, %v; want nil, nil", out, err)
	}
}

// Two requests in flight under one id (Claude Code's two clients of a
// server each number from 0) are both served, each reply with its id.
func TestBridgeSameIDInFlight(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	handshake(t, b, "tools")
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := b.Handle(context.Background(), "tools", []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`))
		done <- result{out, err}
	}()
	<-ts.started
	r := handle(t, b, "tools", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if r.Error != nil || r.ID != float64(7) || !strings.Contains(string(r.Result), `"block"`) {
		t.Errorf("tools/list under an id in flight = %+v, want the tools under id 7", r)
	}
	b.CancelCalls()
	res := <-done
	if res.err != nil {
		t.Fatalf("blocked Handle() error = %v, want a reply", res.err)
	}
	if r := decodeReply(t, res.out); r.ID != float64(7) {
		t.Errorf("blocked call's reply = %s, want id 7", res.out)
	}
}

func TestBridgeConcurrentCalls(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"a": ts.Server, "b": ts.Server})
	handshake(t, b, "a")
	handshake(t, b, "b")
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			server := []string{"a", "b"}[i%2]
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%d"}}}`, i+10, i)
			out, err := b.Handle(context.Background(), server, []byte(msg))
			if err != nil {
				t.Errorf("Handle(%d) error = %v", i, err)
				return
			}
			var r reply
			json.Unmarshal(out, &r)
			var res mcp.CallToolResult
			json.Unmarshal(r.Result, &res)
			if r.ID != float64(i+10) || textOf(t, &res) != fmt.Sprintf(`{"text":"%d"}`, i) {
				t.Errorf("Handle(%d) = %s, want its own answer", i, out)
			}
		})
	}
	wg.Wait()
}

// callBridgeBlocked starts a "block" call through b and waits until its
// handler runs. The returned channel yields Handle's reply and error.
func callBridgeBlocked(t *testing.T, ts *testServer, b *Bridge, ctx context.Context, id int) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Handle(ctx, "tools", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block","arguments":{}}}`, id))
		errc <- err
	}()
	<-ts.started
	return errc
}

func TestBridgeHandleContextCancelsCall(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	handshake(t, b, "tools")
	ctx, cancel := context.WithCancel(t.Context())
	errc := callBridgeBlocked(t, ts, b, ctx, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Handle() error = %v, want context.Canceled", err)
	}
	// The server got notifications/cancelled for the call, as from a client.
	if cause := <-ts.causes; !errors.Is(cause, context.Canceled) {
		t.Errorf("handler's context cause = %v, want context.Canceled", cause)
	}
}

// A second client's handshake is answered with the first one's result and
// takes nothing from the first client: its call goes on, and both list and
// call the tools.
func TestBridgeSecondClient(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	ts.inits.Store(0) // NewBridge listed the tools to check them
	first := handshake(t, b, "tools")
	if first.Error != nil {
		t.Fatalf("initialize reply = %+v, want a result", first)
	}
	done := make(chan []byte, 1)
	go func() {
		out, err := b.Handle(context.Background(), "tools", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`))
		if err != nil {
			t.Errorf("first client's call: Handle() error = %v", err)
		}
		done <- out
	}()
	<-ts.started
	second := handshake(t, b, "tools")
	if second.Error != nil || string(second.Result) != string(first.Result) || second.ID != float64(0) {
		t.Errorf("second initialize reply = %+v, want the first one's result %s under id 0", second, first.Result)
	}
	r := handle(t, b, "tools", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.Error != nil || !strings.Contains(string(r.Result), `"echo"`) {
		t.Errorf("second client's tools/list = %+v, want the tools", r)
	}
	r = handle(t, b, "tools", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"two"}}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "two") {
		t.Errorf("second client's call = %+v", r)
	}
	select {
	case cause := <-ts.causes:
		t.Fatalf("the first client's call ended (cause %v) when a second client initialized", cause)
	default:
	}
	// The CLI cancels the first client's call by the id it gave it.
	if out, err := b.Handle(t.Context(), "tools", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"interrupted"}}`)); err != nil || out != nil {
		t.Fatalf("Handle(cancelled) = %q, %v, want nil, nil", out, err)
	}
	if cause := <-ts.causes; !errors.Is(cause, context.Canceled) {
		t.Errorf("cancelled call's cause = %v, want context.Canceled", cause)
	}
	if r := decodeReply(t, <-done); r.ID != float64(1) {
		t.Errorf("cancelled call's reply id = %v, want 1", r.ID)
	}
	if n := ts.inits.Load(); n != 1 {
		t.Errorf("server received %d initialize requests, want 1 (one handshake for both clients)", n)
	}
}

// Claude Code's two clients of a server open at once: both handshakes and
// both tools/list under the same ids, overlapping, must succeed.
func TestBridgeClientsAtOnce(t *testing.T) {
	for round := range 50 {
		ts := newTestServer(t, false)
		b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
		var wg sync.WaitGroup
		for client := range 2 {
			wg.Go(func() {
				for _, msg := range []string{initializeMsg, initializedMsg, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`} {
					out, err := b.Handle(t.Context(), "tools", []byte(msg))
					if err != nil {
						t.Errorf("round %d, client %d: Handle(%s) error = %v", round, client, msg, err)
						return
					}
					if out == nil {
						continue
					}
					if r := decodeReply(t, out); r.Error != nil || len(r.Result) == 0 {
						t.Errorf("round %d, client %d: Handle(%s) = %s, want a result", round, client, msg, out)
						return
					} else if strings.Contains(msg, "tools/list") && !strings.Contains(string(r.Result), `"echo"`) {
						t.Errorf("round %d, client %d: tools/list = %s, want the tools", round, client, out)
					}
				}
			})
		}
		wg.Wait()
		b.Close()
	}
}

// A connection that ended answers requests with an error until the CLI
// initializes again, which opens a new one.
func TestBridgeConnectionEnded(t *testing.T) {
	ts := newTestServer(t, false)
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	handshake(t, b, "tools")
	b.mu.Lock()
	c := b.conns["tools"]
	b.mu.Unlock()
	c.ss.Close()
	<-c.done
	r := handle(t, b, "tools", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if r.Error == nil || !strings.Contains(r.Error.Message, "initialize it again") {
		t.Errorf("tools/list on an ended connection = %+v, want an error saying to initialize again", r)
	}
	if r := handshake(t, b, "tools"); r.Error != nil {
		t.Fatalf("initialize after the end = %+v, want a result", r)
	}
	r = handle(t, b, "tools", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "again") {
		t.Errorf("call on the new connection = %+v", r)
	}
}

// newBigServer returns a server with a tool "big" whose result is a text of
// the size it is asked for.
func newBigServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1.0.0"}, nil)
	type in struct {
		Size int `json:"size"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Return size bytes."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", a.Size)}}}, nil, nil
		})
	return s
}

// bigCall returns the tools/call message of "big" for size bytes.
func bigCall(id, size int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"size":%d}}}`, id, size)
}

// A result over the go-sdk's line limit of its in-memory transport
// (16 MiB) reaches the CLI whole, and the server goes on serving.
func TestBridgeLargeResult(t *testing.T) {
	b := newTestBridge(t, map[string]*mcp.Server{"big": newBigServer()}, &Options{MaxReply: 64 << 20})
	handshake(t, b, "big")
	const size = 17 << 20
	r := handle(t, b, "big", bigCall(1, size))
	var res mcp.CallToolResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.IsError || len(textOf(t, &res)) != size {
		t.Fatalf("reply to a call of %d bytes: error %+v, %d bytes of result", size, r.Error, len(r.Result))
	}
	r = handle(t, b, "big", bigCall(2, 10))
	if json.Unmarshal(r.Result, &res) != nil || textOf(t, &res) != strings.Repeat("x", 10) {
		t.Errorf("the next call's reply = %+v, want its result", r)
	}
}

// A reply over MaxReply fails its request alone, saying why: a tool error
// the agent reads for a tools/call, a JSON-RPC error otherwise; the server
// goes on serving.
func TestBridgeReplyOverLimit(t *testing.T) {
	b := newTestBridge(t, map[string]*mcp.Server{"big": newBigServer()}, &Options{MaxReply: 64 << 10})
	r := handshake(t, b, "big")
	if r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	r = handle(t, b, "big", bigCall(1, 100<<10))
	var res mcp.CallToolResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || !res.IsError {
		t.Fatalf("reply over the limit = %+v, want a tool error result", r)
	}
	if msg := textOf(t, &res); !strings.Contains(msg, "more than the 65536 bytes") || !strings.Contains(msg, `"big"`) {
		t.Errorf("tool error = %q, want the server and the limit named", msg)
	}
	r = handle(t, b, "big", bigCall(2, 10))
	if json.Unmarshal(r.Result, &res) != nil || res.IsError || textOf(t, &res) != strings.Repeat("x", 10) {
		t.Errorf("the next call's reply = %+v, want its result", r)
	}

	// Another request over the limit gets a JSON-RPC error.
	small := newTestBridge(t, map[string]*mcp.Server{"big": newBigServer()}, &Options{MaxReply: 100})
	handshakeReply, err := small.Handle(t.Context(), "big", []byte(initializeMsg))
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeReply(t, handshakeReply); r.Error == nil || r.Error.Code != jsonrpc.CodeInternalError || !strings.Contains(r.Error.Message, "initialize") {
		t.Errorf("initialize reply over the limit = %s, want a JSON-RPC error naming the method", handshakeReply)
	}
}
