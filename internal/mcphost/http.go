package mcphost

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenAddr is the only address a Host listens on: IPv4 loopback, a port
// chosen by the kernel.
const listenAddr = "127.0.0.1:0"

// A Host serves a run's MCP servers over streamable HTTP on the loopback
// address, behind a per-run bearer token. It is made by [Serve] and ended by
// [Host.Close]. Its methods are safe for concurrent use.
type Host struct {
	ln    net.Listener
	srv   *http.Server
	token string
	urls  map[string]string
	calls *calls

	mu       sync.Mutex // guards closed and the Add of requests
	closed   bool
	requests sync.WaitGroup // HTTP handlers running

	served    chan struct{} // closed when srv.Serve has returned
	stopAfter func() bool   // stops the AfterFunc on Serve's context
	closeOnce sync.Once
}

// Serve checks servers, listens on a random port of 127.0.0.1 and serves
// each server at /mcp/<name>, where name is its key in servers. It returns a
// [*ConfigError] (several joined) if a server would not work with a CLI, and
// a [*ListenError] if it cannot listen; in both cases nothing was started.
//
// Every request must carry "Authorization: Bearer <token>" with the Host's
// [Host.Token]; any other request is answered 401 and reaches no server.
// When ctx is done the Host shuts down as [Host.Close] does; Close must
// still be called, and waits for that shutdown. opts may be nil.
func Serve(ctx context.Context, servers map[string]*mcp.Server, opts *Options) (*Host, error) {
	return serve(ctx, servers, opts, net.Listen)
}

// serve is Serve with the listen function as a parameter, for tests.
func serve(ctx context.Context, servers map[string]*mcp.Server, opts *Options, listen func(network, addr string) (net.Listener, error)) (*Host, error) {
	if err := validate(ctx, servers); err != nil {
		return nil, err
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	ln, err := listen("tcp", listenAddr)
	if err != nil {
		return nil, &ListenError{Addr: listenAddr, Err: err}
	}
	if opts != nil && opts.Admit != nil {
		ln = newAdmitListener(ln, opts.Admit)
	}
	h := &Host{
		ln:     ln,
		token:  token,
		urls:   make(map[string]string, len(servers)),
		calls:  newCalls(opts),
		served: make(chan struct{}),
	}
	mux := http.NewServeMux()
	for name, s := range servers {
		instrument(s)
		path := "/mcp/" + name
		h.urls[name] = "http://" + ln.Addr().String() + path
		mux.Handle(path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	}
	h.srv = &http.Server{Handler: h.guard(mux)}
	if opts != nil && opts.Admit != nil {
		// One request per connection, so that each request is on a
		// connection Admit was asked about when it arrived: a copy of an
		// admitted client's socket, taken after that, has no request of
		// its own to send on it.
		h.srv.SetKeepAlivesEnabled(false)
	}
	go func() {
		defer close(h.served)
		h.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	h.stopAfter = context.AfterFunc(ctx, func() { h.Close() })
	return h, nil
}

// newToken returns 32 random bytes, base64url-encoded.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// guard is the Host's outermost handler: it counts requests so Close can wait
// for them, refuses them once the Host is closing, checks the token, and
// puts the Host's calls into the request's context, from which the go-sdk
// derives the context of every handler of a session the request starts.
func (h *Host) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			http.Error(w, "closed", http.StatusServiceUnavailable)
			return
		}
		h.requests.Add(1)
		h.mu.Unlock()
		defer h.requests.Done()

		if !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(withCalls(r.Context(), h.calls)))
	})
}

// authorized reports whether r carries the Host's token in its Authorization
// header. The scheme is matched without regard to case (RFC 7235); the token
// is compared in constant time. A token anywhere else (a query parameter, a
// cookie) does not count.
func (h *Host) authorized(r *http.Request) bool {
	const scheme = "Bearer "
	v := r.Header.Get("Authorization")
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(v[len(scheme):]), []byte(h.token)) == 1
}

// URL returns the URL at which the named server is served, or "" if the Host
// serves no server of that name.
func (h *Host) URL(name string) string { return h.urls[name] }

// URLs returns a new map from each server's name to its URL.
func (h *Host) URLs() map[string]string { return maps.Clone(h.urls) }

// Token returns the bearer token every request must carry.
func (h *Host) Token() string { return h.token }

// Header returns a new header holding the Authorization field a client must
// send: "Bearer " followed by the token.
func (h *Host) Header() http.Header {
	return http.Header{"Authorization": {"Bearer " + h.token}}
}

// Addr returns the address the Host listens on, on 127.0.0.1.
func (h *Host) Addr() net.Addr { return h.ln.Addr() }

// CancelCalls cancels the context of every call in progress, with cause
// [ErrCallCancelled]; calls that arrive later are served as usual. The owner
// calls it when the turn that made the calls is cancelled.
func (h *Host) CancelCalls() { h.calls.cancel(ErrCallCancelled) }

// Close shuts the Host down: it stops listening, cancels the context of
// every call in progress (cause [ErrClosed]), ends every session and returns
// when no HTTP handler and no tool handler still runs. A handler that
// ignores its context holds Close until it returns. Close may be called more
// than once and concurrently; every call waits for the shutdown. It always
// returns nil; it has an error result so that a Host is an io.Closer.
func (h *Host) Close() error {
	h.closeOnce.Do(h.shutdown)
	return nil
}

func (h *Host) shutdown() {
	h.stopAfter()
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	sessions := h.calls.close()
	// Closing the server closes the listener and every connection, which
	// cancels the contexts of the HTTP requests: POSTs waiting for a reply
	// and standalone SSE streams return.
	// Its error is the listener's close error, and the listener is closed
	// either way.
	_ = h.srv.Close()
	<-h.served
	h.requests.Wait()
	// A go-sdk session closes only when its handlers have returned, and its
	// reader goroutine ends only when it closes. Sessions the client ended
	// itself are closed already; Close on them returns at once.
	for _, ss := range sessions {
		ss.Close()
	}
	h.calls.wait()
}

// maxAdmitting bounds the Admit calls that run at once, so that a
// client opening connections by the hundred cannot make the Host run as
// many lookups together.
const maxAdmitting = 4

// admitListener wraps each accepted connection so that Admit is asked
// about it on the connection's own goroutine, before its first read,
// never in the accept loop, where a slow answer would hold every other
// client's connection.
type admitListener struct {
	net.Listener
	admit func(local, remote netip.AddrPort) string
	slots chan struct{} // maxAdmitting
}

func newAdmitListener(ln net.Listener, admit func(local, remote netip.AddrPort) string) *admitListener {
	return &admitListener{Listener: ln, admit: admit, slots: make(chan struct{}, maxAdmitting)}
}

func (l *admitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &admitConn{Conn: c, l: l}, nil
}

// errRefused is the read error of a connection Admit refused: a read
// error, as net/http expects of a connection that is gone.
var errRefused = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("mcphost: connection refused by Admit")}

// admitConn is an accepted connection whose first Read asks Admit about
// it, and closes it if refused.
type admitConn struct {
	net.Conn
	l    *admitListener
	once sync.Once
	err  error
}

// CloseWrite half-closes the connection where it can, as net/http does
// before it closes a connection whose request it did not read whole.
func (c *admitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *admitConn) Read(b []byte) (int, error) {
	c.once.Do(c.check)
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

// check asks Admit about c, at most maxAdmitting at once.
func (c *admitConn) check() {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return // not TCP: a test's listener
	}
	// Refused until Admit answers: a panic in it leaves the connection
	// refused and its slot free.
	c.err = errRefused
	c.l.slots <- struct{}{}
	defer func() { <-c.l.slots }()
	if why := c.l.admit(unmapPort(local.AddrPort()), unmapPort(remote.AddrPort())); why != "" {
		c.Conn.Close()
		return
	}
	c.err = nil
}

// unmapPort is ap with an IPv4-mapped IPv6 address unmapped.
func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
