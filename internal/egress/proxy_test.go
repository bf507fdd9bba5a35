package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestSandboxNetParseRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rule
	}{
		{"api.openai.com", Rule{"api.openai.com", 0}},
		{"API.OpenAI.com.:443", Rule{"api.openai.com", 443}},
		{"*.googleapis.com", Rule{"*.googleapis.com", 0}},
		{"*.googleapis.com:443", Rule{"*.googleapis.com", 443}},
		{"192.0.2.7", Rule{"192.0.2.7", 0}},
		{"::1", Rule{"::1", 0}},
		{"[::1]:8080", Rule{"::1", 8080}},
	} {
		got, err := ParseRule(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "*", "a.*.com", "*com", "host:0", "host:70000", "host:x", "ex ample.com", "a..b", "host:"} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", in, r)
		} else if !strings.Contains(err.Error(), "*.domain") {
			t.Errorf("ParseRule(%q): %v: the error does not say how to write a rule", in, err)
		}
	}
}

func TestSandboxNetRuleMatches(t *testing.T) {
	for _, c := range []struct {
		rule, host string
		port       int
		want       bool
	}{
		{"example.com", "example.com", 443, true},
		{"example.com", "www.example.com", 443, false},
		{"example.com:443", "example.com", 80, false},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "a.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 80, true},
		{"*.example.com", "badexample.com", 443, false},
		{"*.example.com:443", "a.example.com", 8443, false},
		{"192.0.2.7:80", "192.0.2.7", 80, true},
	} {
		r, err := ParseRule(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.matches(c.host, c.port); got != c.want {
			t.Errorf("%q matches %s:%d = %v, want %v", c.rule, c.host, c.port, got, c.want)
		}
	}
}

// proxyRig is a Proxy serving on the host's loopback whose dials of
// names under .test reach a small HTTP server (if mapNames), and which keeps
// what OnAttempt was given.
type proxyRig struct {
	p      *Proxy
	addr   string // the proxy's
	server string // the HTTP server's
	mu     sync.Mutex
	seen   []Attempt
}

func newProxyRig(t *testing.T, cfg Config, mapNames bool) *proxyRig {
	t.Helper()
	srv := serveHTTP(t, "127.0.0.1:0")
	r := &proxyRig{server: srv}
	if mapNames {
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			if host, _, _ := net.SplitHostPort(addr); strings.HasSuffix(host, ".test") {
				addr = srv
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	cfg.OnAttempt = func(a Attempt) {
		r.mu.Lock()
		r.seen = append(r.seen, a)
		r.mu.Unlock()
	}
	p, err := NewProxy(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.p, r.addr = p, l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != ErrClosed {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return r
}

// serveHTTP serves, on addr, "hello from PATH" for every path, and
// "up:N" (N the bytes of the body) for a POST, until the test ends.
func serveHTTP(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "up:%d", n)
			return
		}
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return l.Addr().String()
}

// exchange sends raw to the proxy and returns its first response, the
// body read whole.
func (r *proxyRig) exchange(t *testing.T, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	tunnel := resp.StatusCode == http.StatusOK && method == http.MethodConnect
	var body []byte
	if !tunnel { // a tunnel's answer has no body: the bytes that follow are the destination's
		body, _ = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	if tunnel {
		// Through the tunnel: a request to the server itself.
		io.WriteString(c, "GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("through the tunnel: %v", err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp, string(body)
}

// tunnel opens a CONNECT tunnel through the proxy to hold, and returns
// the client's connection and the one hold accepted from the proxy.
func (r *proxyRig) tunnel(t *testing.T, hold net.Listener) (c, up net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", hold.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.Close()
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if up, err = hold.Accept(); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, up
}

// attempts returns what OnAttempt was given, after the proxy closed, so
// that every connection has settled.
func (r *proxyRig) attempts() []Attempt {
	r.p.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

func TestSandboxNetProxy(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	rig := newProxyRig(t, Config{Allow: []Rule{{Host: "allowed.test", Port: 80}, {Host: "*.wild.test"}}}, true)
	for _, c := range []struct {
		raw, status, body string
	}{
		{"GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "200", "hello from /x"},
		{"POST http://allowed.test/p HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n\r\nabcde", "200", "up:5"},
		{"CONNECT a.wild.test:443 HTTP/1.1\r\nHost: a.wild.test:443\r\n\r\n", "200", "hello from /tunnel"},
		{"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", "403", "allowed.test:443 denied: not in the allowlist"},
		{"GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n", "403", "other.test:80 denied"},
		{"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "400", "forward proxy"},
		{"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "400", "CONNECT"},
		{"CONNECT allowed.test HTTP/1.1\r\n\r\n", "400", "host:port"},
		{"GET http://allowed.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", DefaultMaxHeaderBytes) + "\r\n\r\n", "431", "exceed"},
	} {
		resp, body := rig.exchange(t, c.raw)
		if got := fmt.Sprint(resp.StatusCode); got != c.status || !strings.Contains(body, c.body) {
			t.Errorf("%.60q: %s %q, want %s and a body with %q", c.raw, got, body, c.status, c.body)
		}
	}
	var got []string
	for _, a := range rig.attempts() {
		got = append(got, fmt.Sprintf("%s %s:%d allowed=%v sent>0=%v received>0=%v", a.Method, a.Host, a.Port, a.Allowed, a.Sent > 0, a.Received > 0))
		if !a.Allowed && !strings.Contains(a.Err, "denied") {
			t.Errorf("denied %s:%d: Err %q does not say why", a.Host, a.Port, a.Err)
		}
	}
	want := []string{
		"GET allowed.test:80 allowed=true sent>0=true received>0=true",
		"POST allowed.test:80 allowed=true sent>0=true received>0=true",
		"CONNECT a.wild.test:443 allowed=true sent>0=true received>0=true",
		"CONNECT allowed.test:443 allowed=false sent>0=false received>0=false",
		"GET other.test:80 allowed=false sent>0=false received>0=false",
	}
	slices.Sort(got) // settled when each connection ends, in any order
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(rig.p.Attempts()); n != len(want) {
		t.Errorf("Attempts() holds %d, want %d", n, len(want))
	}
}

// TestSandboxNetProxyRefusesLoopback: the default dialer refuses an
// allowed name that resolves to a loopback address, and lets through a
// rule naming the address itself.
func TestSandboxNetProxyRefusesLoopback(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	srv := serveHTTP(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(srv)
	rig := newProxyRig(t, Config{
		Allow: []Rule{{Host: "localhost"}, {Host: "127.0.0.1"}},
	}, false)
	resp, body := rig.exchange(t, "GET http://localhost:"+port+"/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "resolves to 127.0.0.1") {
		t.Errorf("localhost: %d %q, want 403 saying it resolves to 127.0.0.1", resp.StatusCode, body)
	}
	resp, body = rig.exchange(t, "GET http://127.0.0.1:"+port+"/ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp.StatusCode != http.StatusOK || body != "hello from /ok" {
		t.Errorf("127.0.0.1 named by a rule: %d %q, want 200", resp.StatusCode, body)
	}
	if a := rig.attempts(); len(a) != 2 || a[0].Allowed || !a[1].Allowed {
		t.Errorf("attempts %+v, want localhost denied and 127.0.0.1 allowed", a)
	}
}

// TestSandboxNetProxyCloseEndsTunnels: Close ends a tunnel in use and
// returns once its goroutines have.
func TestSandboxNetProxyCloseEndsTunnels(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	rig := newProxyRig(t, Config{Allow: []Rule{{Host: "127.0.0.1"}}}, false)
	c, up := rig.tunnel(t, hold)
	defer c.Close()
	defer up.Close()
	rig.p.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the tunnel still reads after Close")
	}
}

// TestSandboxNetProxyBoundsRecord: past MaxRecorded, attempts are counted
// in Dropped, not kept, and OnAttempt still sees each one.
func TestSandboxNetProxyBoundsRecord(t *testing.T) {
	p, err := NewProxy(&Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	seen := 0
	p.cfg.OnAttempt = func(Attempt) { seen++ }
	for range MaxRecorded + 3 {
		p.record(Attempt{Host: "denied.test", Port: 80})
	}
	if n, d := len(p.Attempts()), p.Dropped(); n != MaxRecorded || d != 3 || seen != MaxRecorded+3 {
		t.Errorf("kept %d, dropped %d, OnAttempt saw %d; want %d, 3, %d", n, d, seen, MaxRecorded, MaxRecorded+3)
	}
}

// TestSandboxNetProxyDials: while a tunnel is open, the address its
// destination sees as the client's is in Dials, and the address of a
// client that did not come through the proxy is not; once the proxy is
// closed, and after a dial that failed, the set is empty.
func TestSandboxNetProxyDials(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	var dials Dials
	rig := newProxyRig(t, Config{Allow: []Rule{{Host: "127.0.0.1"}}, Dials: &dials}, false)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if resp, _ := rig.exchange(t, fmt.Sprintf("CONNECT %s HTTP/1.1\r\n\r\n", closed.Addr())); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("CONNECT to a closed port: %s, want 502", resp.Status)
	}
	c, up := rig.tunnel(t, hold)
	defer c.Close()
	defer up.Close()
	other, err := net.Dial("tcp", hold.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ap := up.RemoteAddr().(*net.TCPAddr).AddrPort(); !dials.Has(ap) {
		t.Errorf("Dials lacks the tunnel's client address %s", ap)
	}
	if ap := other.LocalAddr().(*net.TCPAddr).AddrPort(); dials.Has(ap) {
		t.Errorf("Dials has %s, a client that did not come through the proxy", ap)
	}
	rig.p.Close()
	dials.mu.Lock()
	defer dials.mu.Unlock()
	if len(dials.open) != 0 {
		t.Errorf("Dials holds %v once the proxy is closed, want nothing", dials.open)
	}
}

// TestSandboxNetProxyGuardOnlyGuarded: while Guard calls about the
// guarded endpoint fill every slot and more wait for one, a request to
// another destination is neither asked about nor kept waiting.
func TestSandboxNetProxyGuardOnlyGuarded(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	guarded, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	entered, release := make(chan netip.AddrPort, 2*maxGuarding), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	cfg := Config{Allow: []Rule{{Host: "127.0.0.1"}}, Guarded: guarded.Addr().(*net.TCPAddr).AddrPort(),
		Guard: func(ep, _, _ netip.AddrPort) string {
			entered <- ep
			<-release
			return "held"
		}}
	rig := newProxyRig(t, cfg, false)
	t.Cleanup(free) // runs before the proxy's Close, which waits for the Guard's calls
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range maxGuarding + 1 {
		c, err := net.Dial("tcp", rig.addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", guarded.Addr())
	}
	for range maxGuarding {
		if ep := <-entered; ep != cfg.Guarded {
			t.Errorf("Guard asked about %s, want only the guarded %s", ep, cfg.Guarded)
		}
	}
	// Every slot is taken, and one more request waits for one: a request
	// elsewhere must not. The deadline fails the test, it does not order it.
	c, err := net.Dial("tcp", rig.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://%s/other HTTP/1.1\r\nHost: x\r\n\r\n", rig.server)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a request to another destination while the guarded one's checks are queued: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello from /other" {
		t.Errorf("the other request: %s %q, want 200 hello from /other", resp.Status, body)
	}
	free()
	for _, c := range flood {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("a request to the guarded endpoint: %v %v, want 403", resp, err)
		}
	}
	for range len(entered) {
		if ep := <-entered; ep != cfg.Guarded {
			t.Errorf("Guard asked about %s, want only the guarded %s", ep, cfg.Guarded)
		}
	}
}
