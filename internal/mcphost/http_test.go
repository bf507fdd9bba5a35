package mcphost

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestHostListsAndCallsTool(t *testing.T) {
	ts := newTestServer(t, false)
	h := serveTest(t, map[string]*mcp.Server{"tools": ts.Server})
	cs := connectHTTP(t, h.URL("tools"), h.Header())

	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools() error = %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	if got, want := strings.Join(names, ","), "block,boom,echo,inspect"; got != want {
		t.Errorf("ListTools() names = %s, want %s", got, want)
	}

	call, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatalf("CallTool(echo) error = %v", err)
	}
	if call.IsError {
		t.Fatalf("CallTool(echo) IsError, content %+v", call.Content)
	}
	if got := textOf(t, call); got != `{"text":"hi"}` {
		t.Errorf("CallTool(echo) text = %s, want {\"text\":\"hi\"}", got)
	}
}

func TestHostURLsAndHeader(t *testing.T) {
	ts := newTestServer(t, false)
	h := serveTest(t, map[string]*mcp.Server{"a": ts.Server, "b-2": ts.Server})
	addr, ok := h.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.Port == 0 {
		t.Fatalf("Addr() = %v, want 127.0.0.1 and a port", h.Addr())
	}
	if got, want := h.URL("b-2"), "http://"+addr.String()+"/mcp/b-2"; got != want {
		t.Errorf("URL(b-2) = %q, want %q", got, want)
	}
	if got := h.URL("missing"); got != "" {
		t.Errorf("URL(missing) = %q, want empty", got)
	}
	if got := len(h.URLs()); got != 2 {
		t.Errorf("len(URLs()) = %d, want 2", got)
	}
	if got, want := h.Header().Get("Authorization"), "Bearer "+h.Token(); got != want {
		t.Errorf("Header() Authorization = %q, want %q", got, want)
	}
	// 32 random bytes, base64url without padding.
	if got := len(h.Token()); got != 43 {
		t.Errorf("len(Token()) = %d, want 43", got)
	}
	other := serveTest(t, map[string]*mcp.Server{"a": ts.Server})
	if other.Token() == h.Token() {
		t.Error("two hosts have the same token")
	}
}

func TestHostRefusesUnauthorized(t *testing.T) {
	ts := newTestServer(t, false)
	h := serveTest(t, map[string]*mcp.Server{"tools": ts.Server})
	ts.received.Store(0) // Serve listed the tools to check them
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	tests := []struct {
		name   string
		query  string
		header string
	}{
		{name: "no header"},
		{name: "wrong token", header: "Bearer " + strings.Repeat("A", 43)},
		{name: "token with a suffix", header: "Bearer " + h.Token() + "x"},
		{name: "token without scheme", header: h.Token()},
		{name: "basic scheme", header: "Basic " + h.Token()},
		{name: "token in query", query: "?access_token=" + h.Token()},
		{name: "token in query and wrong header", query: "?token=" + h.Token(), header: "Bearer nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.URL("tools")+tt.query, strings.NewReader(initialize))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := httpClient(t, nil).Do(req)
			if err != nil {
				t.Fatalf("POST error = %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status = %d, want 401", resp.StatusCode)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("WWW-Authenticate = %q, want Bearer", got)
			}
		})
	}
	if n := ts.received.Load(); n != 0 {
		t.Errorf("server received %d messages from unauthorized requests, want 0", n)
	}

	// The same request with the token does reach the server.
	connectHTTP(t, h.URL("tools"), h.Header())
	if ts.received.Load() == 0 {
		t.Error("server received nothing from an authorized client")
	}
}

func TestHostRefusesUnknownPath(t *testing.T) {
	ts := newTestServer(t, false)
	h := serveTest(t, map[string]*mcp.Server{"tools": ts.Server})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr().String()+"/mcp/other", strings.NewReader("{}"))
	resp, err := httpClient(t, h.Header()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status = %d, want 404", resp.StatusCode)
	}
}

func TestHostCloseRefusesConnections(t *testing.T) {
	ts := newTestServer(t, false)
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("ListTools() error = %v", err)
	}
	h.Close()
	h.Close() // a second Close returns too

	conn, err := net.Dial("tcp", h.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatalf("Dial(%s) after Close succeeded, want connection refused", h.Addr())
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial() after Close error = %v, want ECONNREFUSED", err)
	}
	if n := countSessions(ts.Server); n != 0 {
		t.Errorf("server has %d sessions after Close, want 0", n)
	}
}

// countSessions returns how many sessions s has open.
func countSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// callBlocked starts a "block" call through cs and waits until its handler
// runs. The returned channel yields the call's error.
func callBlocked(t *testing.T, ts *testServer, cs *mcp.ClientSession) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
		errc <- err
	}()
	<-ts.started
	return errc
}

func TestHostHandlerPanicIsToolError(t *testing.T) {
	ts := newTestServer(t, false)
	panics := make(chan any, 1)
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, &Options{OnPanic: func(p any, _ bool) { panics <- p }})
	if err != nil {
		t.Fatalf("Serve() error = %v", err)
	}
	t.Cleanup(func() { h.Close() })
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "boom"})
	if err != nil {
		t.Fatalf("CallTool(boom) error = %v, want a tool error result", err)
	}
	if !res.IsError {
		t.Errorf("CallTool(boom) IsError = false, want true")
	}
	if got := textOf(t, res); !strings.Contains(got, "kaboom") || !strings.Contains(got, `"boom"`) {
		t.Errorf("CallTool(boom) text = %q, want the tool's name and the panic value", got)
	}
	select {
	case p := <-panics:
		if p != "kaboom" {
			t.Errorf("onPanic got %v, want the panic's value", p)
		}
	default:
		t.Error("onPanic was not called before the reply")
	}
	// The session survives the panic.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Errorf("CallTool(echo) after a panic error = %v", err)
	}
}

func TestServeContextDoneCloses(t *testing.T) {
	ts := newTestServer(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := Serve(ctx, map[string]*mcp.Server{"tools": ts.Server}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	errc := callBlocked(t, ts, cs)
	cancel()
	if cause := <-ts.causes; !errors.Is(cause, ErrClosed) {
		t.Errorf("handler's context cause = %v, want ErrClosed", cause)
	}
	h.Close()
	<-errc
	if _, err := net.Dial("tcp", h.Addr().String()); err == nil {
		t.Error("Dial after the context was done succeeded, want refused")
	}
}

func TestServeListenError(t *testing.T) {
	ts := newTestServer(t, false)
	refused := errors.New("no loopback here")
	var got string
	_, err := serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, nil, func(network, addr string) (net.Listener, error) {
		got = addr
		return nil, refused
	})
	var le *ListenError
	if !errors.As(err, &le) || !errors.Is(err, refused) {
		t.Fatalf("serve() error = %v, want a *ListenError wrapping the listen error", err)
	}
	if got != "127.0.0.1:0" || le.Addr != "127.0.0.1:0" {
		t.Errorf("listened on %q (error says %q), want 127.0.0.1:0", got, le.Addr)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	ts := newTestServer(t, false)
	_, err := Serve(t.Context(), map[string]*mcp.Server{"bad name": ts.Server}, nil)
	if !errors.Is(err, ErrBadName) {
		t.Fatalf("Serve() error = %v, want ErrBadName", err)
	}
}

// TestHostAdmit: a connection Admit refuses is closed before a request is
// read, whatever its token; one it admits is served. Admit sees the
// Host's address and the client's.
func TestHostAdmit(t *testing.T) {
	ts := newTestServer(t, false)
	var refuse atomic.Bool
	seen := make(chan [2]netip.AddrPort, 4)
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, &Options{Admit: func(local, remote netip.AddrPort) string {
		select {
		case seen <- [2]netip.AddrPort{local, remote}:
		default: // the admitted client's connections, one per request
		}
		if refuse.Load() {
			return "not the CLI"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	refuse.Store(true)
	c, err := net.Dial("tcp", h.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /mcp/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+h.Token()+"\r\n\r\n")
	if b, err := io.ReadAll(c); len(b) != 0 {
		t.Errorf("a refused connection got %q (%v), want it closed unanswered", b, err)
	}
	got := <-seen
	if got[0].String() != h.Addr().String() || got[1].String() != c.LocalAddr().String() {
		t.Errorf("Admit saw %v, want the Host's %s and the client's %s", got, h.Addr(), c.LocalAddr())
	}

	refuse.Store(false)
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("ListTools() through an admitted connection: %v", err)
	}
}

// TestHostAdmitOneRequest: with Admit, a connection carries one request:
// of two sent together on an admitted connection, the Host answers the
// first and closes it, so that a second request always comes on a
// connection Admit is asked about.
func TestHostAdmitOneRequest(t *testing.T) {
	ts := newTestServer(t, false)
	var asked atomic.Int64
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, &Options{Admit: func(local, remote netip.AddrPort) string {
		asked.Add(1)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := net.Dial("tcp", h.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET /mcp/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n"
	io.WriteString(c, req+req)
	c.SetReadDeadline(time.Now().Add(testenv.Timeout(testenv.Hang)))
	b, err := io.ReadAll(c)
	if n := strings.Count(string(b), "HTTP/1.1 401"); n != 1 || err != nil {
		t.Errorf("two requests on one connection: %d answers, read error %v; want one answer, then the connection closed", n, err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("Admit asked %d times, want once", n)
	}
}

// TestHostAdmitConcurrent: Admit runs on the connection's goroutine, not
// in the accept loop: while it has not answered for one connection,
// another is admitted and served.
func TestHostAdmitConcurrent(t *testing.T) {
	ts := newTestServer(t, false)
	release, entered := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, &Options{Admit: func(local, remote netip.AddrPort) string {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
			return "held"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	defer close(release)
	held, err := net.Dial("tcp", h.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	io.WriteString(held, "GET /mcp/tools HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered // Admit holds the first connection
	ctx, cancel := context.WithTimeout(t.Context(), testenv.Timeout(testenv.Hang))
	defer cancel()
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("ListTools() while Admit holds another connection: %v", err)
	}
}

// TestHostAdmitPanics: an Admit that panics leaves its connection closed
// unanswered and its slot free: after more panics than there are slots,
// an admitted client is still served.
func TestHostAdmitPanics(t *testing.T) {
	ts := newTestServer(t, false)
	var panics atomic.Int64
	h, err := Serve(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, &Options{Admit: func(local, remote netip.AddrPort) string {
		if panics.Add(1) <= maxAdmitting+1 {
			panic("admit failed")
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for range maxAdmitting + 1 {
		c, err := net.Dial("tcp", h.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /mcp/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+h.Token()+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testenv.Timeout(testenv.Hang)))
		// Closed unanswered: an end of file, or a reset where the
		// request was left unread.
		if b, err := io.ReadAll(c); len(b) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a connection whose Admit panicked got %q (%v), want it closed unanswered", b, err)
		}
		c.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), testenv.Timeout(testenv.Hang))
	defer cancel()
	cs := connectHTTP(t, h.URL("tools"), h.Header())
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("ListTools() after %d panics of Admit: %v", maxAdmitting+1, err)
	}
}
