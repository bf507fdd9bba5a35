package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMaxHeaderBytes bounds a request's line and headers when
// Config.MaxHeaderBytes is zero.
const DefaultMaxHeaderBytes = 64 << 10

// MaxRecorded bounds the attempts a Proxy keeps for Attempts, so that a
// run looping on refused requests cannot grow the host's memory without
// end; OnAttempt still sees every attempt, and Dropped counts the others.
const MaxRecorded = 10000

// headerTimeout bounds the wait for a request's line and headers, so that
// a client that connects and says nothing does not hold a goroutine for
// the whole run.
const headerTimeout = time.Minute

// dialTimeout bounds a dial to an allowed host.
const dialTimeout = 30 * time.Second

// An Attempt is one connection the run asked for: through the proxy
// (CONNECT or a plain HTTP request), to a forwarded loopback endpoint, or
// straight to an address, bypassing the proxy (Net only).
type Attempt struct {
	// Time is when the request arrived.
	Time time.Time
	// Method is "CONNECT", the HTTP method of a plain request ("GET",
	// "POST", …), "FORWARD" for a loopback endpoint, MethodDirect for a
	// TCP connection that bypassed the proxy, or MethodDirectUDP for a
	// UDP datagram (both always denied).
	Method string
	// Host and Port name the destination as the run asked for it (an
	// IP address for MethodDirect and MethodDirectUDP).
	Host string
	Port int
	// Allowed reports whether the rules let the connection through.
	Allowed bool
	// Err says why a connection was denied, or why an allowed one
	// failed (the dial or the transfer); empty when it ended normally.
	Err string
	// Guarded reports that the Guard, not the rules, denied it: its
	// destination is a guarded loopback endpoint, reached by a
	// forwarder or through the proxy.
	Guarded bool
	// Sent and Received count the bytes from the run to the destination
	// and back, headers of a plain request included; zero when denied.
	Sent, Received int64
	// Duration is how long the connection lasted.
	Duration time.Duration
}

// Config says what a run may reach. A zero Config allows nothing: the
// network policy "none", under which every attempt is denied and recorded.
type Config struct {
	// Allow lists the hosts the proxy lets through. Empty allows none.
	Allow []Rule
	// Loopback lists host endpoints ("127.0.0.1:8080", "[::1]:9000",
	// "localhost:8080") that the run reaches at the same address from
	// inside the namespace: the model server of a test, a tool bridge,
	// MCP servers over HTTP. Only Net uses it.
	Loopback []string
	// OnAttempt, if non-nil, is called once per attempt: at once for a
	// denied one, when the connection ends for an allowed one. Calls may
	// be concurrent; each runs on the connection's goroutine, so a slow
	// callback slows that connection only.
	OnAttempt func(Attempt)
	// OnLost, if non-nil, is called with how many refusals of direct
	// connections and datagrams (MethodDirect, MethodDirectUDP) the
	// kernel dropped unread, or refused without the error they are
	// recorded from, since its last call, when it is more than none:
	// attempts the run made that were refused but are not recorded (a
	// burst of datagrams that outran the reader, or that an older
	// kernel's rate limits left unanswered). Only Net calls it, on the
	// reader's goroutine or in Flush.
	OnLost func(n int)
	// Dial, if non-nil, dials an allowed destination. Nil means a
	// net.Dialer that refuses loopback, link-local, multicast and
	// unspecified addresses unless the rule that allowed the connection
	// names that IP address itself, so that an allowed name resolving to
	// 127.0.0.1 or to a cloud metadata address reaches neither.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxHeaderBytes bounds a request's line and headers; zero means
	// DefaultMaxHeaderBytes. A larger request is answered 431.
	MaxHeaderBytes int
	// Guard, if non-nil, is asked about each connection whose dial
	// reached Guarded: a connection accepted for a forwarded loopback
	// endpoint, or a request through the proxy that a rule let through,
	// on the connection's goroutine, once its destination is dialled and
	// before anything is sent to it (the address the dial reached, so
	// that a name, localhost or 0.0.0.0 leading to the guarded endpoint
	// is asked about as that endpoint). Only Net uses it.
	Guard Guard
	// Guarded is the host's endpoint Guard is asked about; connections
	// to any other go through unasked, without waiting for a Guard call
	// to end (maxGuarding), and a forwarded one without forwardGrace.
	Guarded netip.AddrPort
	// Dials, if non-nil, holds the local address of each connection the
	// proxy and the forwarders dial (with the default dialer: not with
	// Dial), while it is open: a guarded endpoint admits those, whose
	// clients the Guard checked, and no other client of the host.
	Dials *Dials
}

// Proxy is an HTTP proxy that lets through CONNECT tunnels and plain HTTP
// requests (absolute URIs) to the hosts its rules allow, without looking
// inside TLS, and records every attempt. It answers 403 to the others.
type Proxy struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	guards chan struct{} // maxGuarding: the Guard calls running

	mu       sync.Mutex // protects the fields below
	closed   bool
	open     map[io.Closer]struct{} // listeners and connections
	attempts []Attempt
	dropped  int // attempts past MaxRecorded
}

// ErrClosed is returned by Serve once the Proxy is closed.
var ErrClosed = errors.New("egress: proxy closed")

// NewProxy returns a Proxy for cfg, which it copies; nil means a zero
// Config. It returns a *RuleError for a rule it cannot use.
func NewProxy(cfg *Config) (*Proxy, error) {
	p := &Proxy{open: map[io.Closer]struct{}{}, guards: make(chan struct{}, maxGuarding)}
	if cfg != nil {
		p.cfg = *cfg
	}
	p.cfg.Allow = append([]Rule(nil), p.cfg.Allow...)
	for i, r := range p.cfg.Allow {
		if err := r.validate(); err != nil {
			return nil, err
		}
		p.cfg.Allow[i].Host = canonHost(r.Host)
	}
	if p.cfg.MaxHeaderBytes <= 0 {
		p.cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Serve accepts connections on l and serves each on its own goroutine
// until Close, then returns ErrClosed; it returns another error if
// Accept fails otherwise. Serve closes l.
func (p *Proxy) Serve(l net.Listener) error {
	return p.accept(l, p.handle)
}

// accept runs serve on a goroutine for each connection l accepts, every
// one tracked so that Close ends and awaits it.
func (p *Proxy) accept(l net.Listener, serve func(net.Conn)) error {
	if !p.track(l) {
		l.Close()
		return ErrClosed
	}
	defer p.untrack(l)
	defer l.Close()
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !p.track(c) {
			c.Close()
			return ErrClosed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			defer c.Close()
			serve(c)
		}()
	}
}

// Close stops every listener, closes every connection, and returns once
// every goroutine of the Proxy has ended. It is safe to call more than
// once.
func (p *Proxy) Close() error {
	// Closed outside mu: closing a file waits for its readers, and the
	// reader of the refusals' socket records what it read under mu.
	p.mu.Lock()
	p.closed = true
	open := make([]io.Closer, 0, len(p.open))
	for c := range p.open {
		open = append(open, c)
	}
	p.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	p.cancel()
	p.wg.Wait()
	return nil
}

// Attempts returns a copy of the attempts recorded so far, in the order
// they were settled: the first MaxRecorded.
func (p *Proxy) Attempts() []Attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Attempt(nil), p.attempts...)
}

// Dropped returns how many attempts Attempts lacks because MaxRecorded
// were already kept.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track adds a listener or a connection to what Close closes; it returns
// false, tracking nothing, once the Proxy is closed.
func (p *Proxy) track(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.open[c] = struct{}{}
	return true
}

// untrack removes what track added.
func (p *Proxy) untrack(c io.Closer) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// record keeps a and hands it to OnAttempt.
func (p *Proxy) record(a Attempt) {
	p.mu.Lock()
	if len(p.attempts) < MaxRecorded {
		p.attempts = append(p.attempts, a)
	} else {
		p.dropped++
	}
	p.mu.Unlock()
	if p.cfg.OnAttempt != nil {
		p.cfg.OnAttempt(a)
	}
}

// errHeaderTooLarge ends a request whose line and headers exceed the bound.
var errHeaderTooLarge = errors.New("request headers too large")

// headerLimit reads from r, failing once n bytes have been read while on.
type headerLimit struct {
	r  io.Reader
	n  int
	on bool
}

func (h *headerLimit) Read(b []byte) (int, error) {
	if !h.on {
		return h.r.Read(b)
	}
	if h.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if len(b) > h.n {
		b = b[:h.n]
	}
	n, err := h.r.Read(b)
	h.n -= n
	return n, err
}

// handle serves one client connection: one CONNECT tunnel or one plain
// HTTP request.
func (p *Proxy) handle(c net.Conn) {
	lim := &headerLimit{r: c, n: p.cfg.MaxHeaderBytes, on: true}
	br := bufio.NewReader(lim)
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		switch {
		case errors.Is(err, errHeaderTooLarge):
			reply(c, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request line and headers exceed %d bytes", p.cfg.MaxHeaderBytes))
		case !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed):
			reply(c, http.StatusBadRequest, "malformed request: "+err.Error())
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	lim.on = false
	a := Attempt{Time: time.Now(), Method: req.Method}
	switch {
	case req.Method == http.MethodConnect:
		a.Host, a.Port, err = splitTarget(req.Host, 0)
	case req.URL.Scheme == "http" && req.URL.Host != "":
		a.Host, a.Port, err = splitTarget(req.URL.Host, 80)
	case req.URL.Scheme == "https":
		reply(c, http.StatusBadRequest, "send https through CONNECT: this proxy does not look inside TLS")
		return
	default:
		reply(c, http.StatusBadRequest, "this is a forward proxy: send CONNECT host:port or a request with an absolute http:// URI")
		return
	}
	if err != nil {
		reply(c, http.StatusBadRequest, err.Error())
		return
	}
	up, err := p.dial(a.Host, a.Port)
	if err == nil {
		if why := p.guard(c, up); why != "" {
			up.Close()
			a.Err, a.Guarded = why, true
			p.record(a)
			reply(c, http.StatusForbidden, "clinvoke egress: "+net.JoinHostPort(a.Host, strconv.Itoa(a.Port))+" refused: "+why)
			return
		}
	}
	if err != nil {
		a.Err = err.Error()
		var d *deniedError
		if errors.As(err, &d) {
			p.record(a)
			reply(c, http.StatusForbidden, err.Error())
			return
		}
		a.Allowed = true
		a.Duration = time.Since(a.Time)
		p.record(a)
		reply(c, http.StatusBadGateway, fmt.Sprintf("%s: %v", net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), err))
		return
	}
	a.Allowed = true
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			a.Err = err.Error()
		} else {
			a.Sent, a.Received, err = splice(c, br, up, 0)
			a.Err = errText(err)
		}
	} else {
		a.Sent, a.Received, err = forwardRequest(c, req, up)
		a.Err = errText(err)
	}
	a.Duration = time.Since(a.Time)
	p.record(a)
}

// guard asks the Guard about the proxy's client c, inside the run's
// namespace, whose request reached up's address: "" to go on, else why
// not.
func (p *Proxy) guard(c, up net.Conn) string {
	g := p.cfg.Guard
	if g == nil {
		return ""
	}
	to, ok := p.guarded(up)
	at, aok := c.LocalAddr().(*net.TCPAddr)
	peer, pok := c.RemoteAddr().(*net.TCPAddr)
	if !ok || !aok || !pok {
		return "" // not the guarded endpoint, or not TCP: a test's connection
	}
	return p.ask(g, to, unmapPort(at.AddrPort()), unmapPort(peer.AddrPort()))
}

// guarded returns the address up reached, and whether it is the
// guarded endpoint (the Guard set).
func (p *Proxy) guarded(up net.Conn) (netip.AddrPort, bool) {
	to, ok := up.RemoteAddr().(*net.TCPAddr)
	if p.cfg.Guard == nil || !ok {
		return netip.AddrPort{}, false
	}
	ap := unmapPort(to.AddrPort())
	return ap, ap == unmapPort(p.cfg.Guarded)
}

// maxGuarding bounds the Guard calls that run at once, so that a run
// opening connections to the guarded endpoint by the hundred cannot make
// as many lookups run together; connections to other destinations never
// wait for them.
const maxGuarding = 4

// ask calls g, at most maxGuarding at once.
func (p *Proxy) ask(g Guard, endpoint, at, peer netip.AddrPort) string {
	p.guards <- struct{}{}
	defer func() { <-p.guards }()
	return g(endpoint, at, peer)
}

// unmapPort is ap with an IPv4-mapped IPv6 address unmapped.
func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// forwardRequest sends req to up in origin form with "Connection: close",
// then copies the answer back to c until up closes.
func forwardRequest(c net.Conn, req *http.Request, up net.Conn) (sent, received int64, err error) {
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Close = true
	w := &countWriter{w: up}
	err = req.Write(w)
	sent = w.n
	if err != nil {
		return sent, 0, err
	}
	received, err = io.Copy(c, up)
	return sent, received, err
}

// splice copies both ways between the client (read through br, which may
// hold bytes it has already read from c) and up, until both directions
// end. If grace is not zero, the client has grace after up has finished
// sending to finish on its side, then its connection is ended.
func splice(c net.Conn, br io.Reader, up net.Conn, grace time.Duration) (sent, received int64, err error) {
	done := make(chan error, 1)
	go func() {
		n, err := io.Copy(up, br)
		atomic.StoreInt64(&sent, n)
		closeWrite(up)
		done <- err
	}()
	received, err = io.Copy(c, up)
	closeWrite(c)
	if grace != 0 {
		c.SetReadDeadline(time.Now().Add(grace))
	}
	if err != nil {
		// The destination failed: end the other direction too.
		c.Close()
		up.Close()
	}
	if e := <-done; err == nil && (grace == 0 || !errors.Is(e, os.ErrDeadlineExceeded)) {
		err = e
	}
	return atomic.LoadInt64(&sent), received, err
}

// closeWrite half-closes c where it can, so that the peer reads EOF.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// errText is the text of err, empty for nil and for a connection closed
// by either side at the end.
func errText(err error) string {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return ""
	}
	return err.Error()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (w *countWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.n += int64(n)
	return n, err
}

// splitTarget reads "host:port" (port optional when def is not zero)
// into a canonical host and a port.
func splitTarget(hostport string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("target %q: want host:port", hostport)
		}
		host, ps = hostport, strconv.Itoa(def)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("target %q: want host:port with a port from 1 to 65535", hostport)
	}
	return canonHost(host), port, nil
}

// deniedError is a connection the rules refuse.
type deniedError struct {
	target string
	why    string
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("clinvoke egress: %s denied: %s; the program that runs the agent may allow it in the run's network rules", e.target, e.why)
}

// rule returns the first rule of c that allows host:port, or nil.
func (c *Config) rule(host string, port int) *Rule {
	for i := range c.Allow {
		if c.Allow[i].matches(host, port) {
			return &c.Allow[i]
		}
	}
	return nil
}

// Allows reports whether a rule of c lets a connection to host:port
// through the proxy.
func (c *Config) Allows(host string, port int) bool { return c.rule(host, port) != nil }

// dial connects to host:port if a rule allows it.
func (p *Proxy) dial(host string, port int) (net.Conn, error) {
	target := net.JoinHostPort(host, strconv.Itoa(port))
	rule := p.cfg.rule(host, port)
	if rule == nil {
		return nil, &deniedError{target: target, why: "not in the allowlist"}
	}
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	defer cancel()
	var up net.Conn
	var err error
	var key netip.AddrPort
	var keyed bool
	if p.cfg.Dial != nil {
		up, err = p.cfg.Dial(ctx, "tcp", target)
	} else {
		d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
			return checkAddr(target, address, rule.literal())
		}}
		up, key, keyed, err = p.cfg.Dials.dial(ctx, d, "tcp", target)
	}
	if err != nil {
		var d *deniedError
		if errors.As(err, &d) {
			return nil, d
		}
		return nil, err
	}
	return p.tracked(up, key, keyed)
}

// tracked returns up tracked for Close, its key in Dials (if keyed)
// removed once it is closed; ErrClosed, up closed, once the Proxy is.
func (p *Proxy) tracked(up net.Conn, key netip.AddrPort, keyed bool) (net.Conn, error) {
	c := &trackedConn{Conn: up, p: p, key: key, keyed: keyed}
	if !p.track(c) { // Close closes c, which takes its key out of Dials first
		c.Close()
		return nil, ErrClosed
	}
	return c, nil
}

// checkAddr refuses an address that is not meant to be reached from a
// run unless the rule names it (explicit).
func checkAddr(target, address string, explicit bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || explicit {
		return nil
	}
	a := ap.Addr().Unmap()
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return &deniedError{target: target, why: fmt.Sprintf("it resolves to %s, a loopback, link-local or unspecified address; a rule naming that address allows it", a)}
	}
	return nil
}

// trackedConn is an upstream connection that Close ends.
type trackedConn struct {
	net.Conn
	p     *Proxy
	key   netip.AddrPort // its local address in Dials, if keyed
	keyed bool
	once  sync.Once
}

// Close removes the connection's key from Dials before it closes it, so
// that the key is never in the set once the port is free.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.p.untrack(c)
		if c.keyed {
			c.p.cfg.Dials.remove(c.key)
		}
	})
	return c.Conn.Close()
}

func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// reply answers a request with status and a plain-text body, then the
// connection closes.
func reply(c net.Conn, status int, body string) {
	body += "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
