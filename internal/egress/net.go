package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// ProxyPort is the port the proxy listens on at 127.0.0.1 inside a run's
// namespace, unless a forwarded loopback endpoint uses it (then the next
// free one above). Nothing else listens in a new namespace, so a fixed
// port is always free, and Env is known before the namespace exists.
const ProxyPort = 3128

// ErrUnavailable is matched (errors.Is) by every error saying this host
// cannot give a run a network namespace.
var ErrUnavailable = errors.New("egress: network namespace unavailable")

// NamespaceError is returned by Enter and Probe when the calling thread
// cannot be moved into a new network namespace with its loopback up. It
// matches ErrUnavailable and its cause (errors.Is).
type NamespaceError struct {
	// Op is the step that failed: "unshare(CLONE_NEWNET)", "bring lo up",
	// or "listen on 127.0.0.1:3128".
	Op string
	// Missing names what the host lacks, and how to get it.
	Missing string
	// Err is the system's error.
	Err error
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("egress: cannot give the run its own network namespace: %s: %v: %s", e.Op, e.Err, e.Missing)
}

// Unwrap returns ErrUnavailable and the cause.
func (e *NamespaceError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Net is a run's network sandbox: a network namespace for the thread that
// starts the run's first process, whose only ways out are the proxy and
// the forwarders of its loopback endpoints, both served from the host's
// namespace.
//
// The life of a Net: New (in the host, before anything starts), Env into
// the run's environment, Prepare as early as the run allows, Enter on the
// locked OS thread that then forks the run's first process, Close once
// the run's tree is gone.
type Net struct {
	proxy      *Proxy
	port       int
	forwards   []netip.AddrPort
	dialTo     map[netip.AddrPort]string // a forward's host address when not its own: "localhost:PORT"
	prepOnce   sync.Once
	nsMu       sync.Mutex    // guards ns between Enter and Close
	made       chan struct{} // closed once Prepare's thread is done; nil until Prepare, and after Close without it
	ns         *os.File      // the namespace Prepare made, until Close
	madeErr    error         // else why it could not be made
	wrapped    *os.File      // the host's end of Wrap's socket
	stageEnd   *os.File      // the first stage's end, closed by Started
	stageNonce string        // what the first stage's message begins with
	plan       *os.File      // the private roots' plan for the first stage, closed by Started
	mntNS      *os.File      // the run's mount namespace its first stage sent, until handed over
	private    bool          // the first stage gave the run its private /tmp and /dev/shm
	privateWhy string        // else why not, as the first stage said
	skipped    []string      // the settings links the first stage left as they are

	direct    syscall.RawConn // the packet socket that sees the refused direct connections
	directMu  sync.Mutex      // held from a refusal's read until it is recorded
	lost      int             // the refusals the kernel dropped unread or left unanswered (Lost), under directMu
	bypassErr error           // why direct connections are not recorded; nil once they are
	// directRef is a second descriptor of the packet socket, or -1: Close
	// releases the socket through it in the background (releaseDirect).
	directRef int
	// counters reads the namespace's counts of refused datagrams and of
	// the errors that answered them (unanswered.go), or is nil;
	// unanswered is how many datagrams they showed refused without an
	// error, counted in lost, under directMu.
	counters   *counters
	unanswered int
}

// New returns the sandbox cfg describes (nil means a zero Config: no
// host reachable). It checks the rules and the loopback endpoints, and
// returns a *RuleError or a *LoopbackError; it starts nothing.
func New(cfg *Config) (*Net, error) {
	p, err := NewProxy(cfg)
	if err != nil {
		return nil, err
	}
	n := &Net{proxy: p, dialTo: map[netip.AddrPort]string{}, bypassErr: errNotCaught, directRef: -1}
	for _, s := range p.cfg.Loopback {
		aps, err := loopbackAddrs(s)
		if err != nil {
			return nil, err
		}
		for _, ap := range aps {
			if !slices.Contains(n.forwards, ap) {
				n.forwards = append(n.forwards, ap)
			}
			if len(aps) > 1 {
				// localhost: whichever of the host's addresses answers,
				// as a client on the host would try both.
				n.dialTo[ap] = "localhost:" + strconv.Itoa(int(ap.Port()))
			}
		}
	}
	n.port = ProxyPort
	for slices.ContainsFunc(n.forwards, func(ap netip.AddrPort) bool { return int(ap.Port()) == n.port }) {
		n.port++
	}
	return n, nil
}

// LoopbackError is returned by New for a loopback endpoint it cannot
// forward.
type LoopbackError struct {
	Endpoint string
	Problem  string
}

func (e *LoopbackError) Error() string {
	return fmt.Sprintf("egress: loopback endpoint %q: %s; write 127.0.0.1:PORT, [::1]:PORT or localhost:PORT", e.Endpoint, e.Problem)
}

// loopbackAddrs reads a loopback endpoint; localhost:PORT means both
// 127.0.0.1:PORT and [::1]:PORT.
func loopbackAddrs(s string) ([]netip.AddrPort, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return nil, &LoopbackError{Endpoint: s, Problem: "not host:port"}
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return nil, &LoopbackError{Endpoint: s, Problem: "the port is not a number from 1 to 65535"}
	}
	if strings.EqualFold(host, "localhost") {
		return []netip.AddrPort{
			netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)),
			netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port)),
		}, nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Unmap().IsLoopback() {
		return nil, &LoopbackError{Endpoint: s, Problem: "not a loopback address"}
	}
	return []netip.AddrPort{netip.AddrPortFrom(a.Unmap(), uint16(port))}, nil
}

// ProxyURL returns the proxy's address as the run sees it:
// "http://127.0.0.1:3128".
func (n *Net) ProxyURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(n.port)
}

// Prepare starts making the run's network namespace in the background,
// on an OS thread of its own that ends once it is done: the namespace
// with its loopback up, the proxy's listener and one listener per
// loopback endpoint opened there and served from goroutines of the
// host's namespace (their dials leave from the host), and the connections
// that bypass the proxy caught (BypassRecorded). Where a namespace made
// ahead holds the proxy's listener on the run's port, Prepare takes it
// before it returns, with no thread of its own: the loopback endpoints'
// listeners, if any, are opened there by a thread of the runtime's that
// visits it and comes back (listenIn). Enter
// then only moves the forking thread into it. Call Prepare as soon as the
// run is known to need the namespace, so that making it overlaps the
// run's other start work; Enter calls it if nothing did. Later calls, and
// calls after Close, do nothing.
func (n *Net) Prepare() {
	n.prepOnce.Do(func() {
		n.made = make(chan struct{})
		rest := n.prepareKept()
		if rest == nil {
			close(n.made)
			return
		}
		sandbox.GoRetired(func() { // the thread, in the namespace, ends with f
			defer close(n.made)
			n.ns, n.madeErr = rest()
		})
	})
}

// Enter moves the calling OS thread into the run's network namespace,
// made by Prepare (called now if nothing called it before), once it is
// ready, and drops NetCaps from the thread (from its bounding set too),
// so that a run as root cannot change the namespace's rules. A process
// the thread forks afterwards is born in the namespace, and so is its
// whole tree: every listener and the catch-all route are in place before
// it.
//
// The caller must hold the thread with runtime.LockOSThread and never
// unlock it, so that the thread ends with its goroutine instead of
// running other goroutines in the namespace. Each call moves its thread:
// a start that forks again from another thread (after a refused clone
// into a cgroup, say) calls it again there. On error, which is a
// *NamespaceError (matching ErrUnavailable) when the host cannot give a
// namespace, or ErrClosed after Close, the thread may be in no namespace
// of the run: start nothing from it.
func (n *Net) Enter() error {
	if err := n.Join(); err != nil {
		return err
	}
	return dropNetCaps()
}

// Join is Enter but for the network capabilities (NetCaps), which it
// leaves to the caller to drop before the thread forks: a caller that
// drops other capabilities too (the filesystem ceiling's) drops them all
// in one call.
func (n *Net) Join() error {
	n.Prepare()
	if n.made == nil {
		return ErrClosed
	}
	<-n.made
	if n.madeErr != nil {
		return n.madeErr
	}
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if n.ns == nil {
		return ErrClosed
	}
	return joinNamespace(n.ns)
}

// Start starts cmd in the sandbox by Enter, for a caller that starts the
// run's first process itself: from a new goroutine locked to its thread,
// which ends once cmd has started, so that the thread runs nothing else
// in the namespace. It returns Enter's error, or cmd.Start's.
func (n *Net) Start(cmd *exec.Cmd) error {
	return sandbox.Retired(func() error {
		if err := n.Enter(); err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		n.Running()
		return nil
	})
}

// Running tells the Net, on Enter's route, that the run's first process
// has started: the namespaces of the next runs are then made in the
// background, off this run's start and, where this run lasts, off the
// next run's (Close has them made too, for a run that never started). On
// Wrap's route, after Close, and on systems without network namespaces,
// it does nothing.
func (n *Net) Running() { n.running() }

// listenAddrs returns the addresses to listen on inside the namespace:
// the proxy's, then each forwarded endpoint's.
func (n *Net) listenAddrs() []string {
	addrs := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))}
	for _, ap := range n.forwards {
		if ap.Addr().Is6() && !ipv6Loopback() {
			continue // no IPv6 in this kernel: localhost means 127.0.0.1 only
		}
		addrs = append(addrs, ap.String())
	}
	return addrs
}

// listen opens, in the calling thread's namespace, the listeners of
// listenAddrs, in that order.
func (n *Net) listen() ([]net.Listener, error) {
	return n.listenOn(n.listenAddrs())
}

// listenForwards opens, in the calling thread's namespace, the listeners
// of listenAddrs but the proxy's, in that order.
func (n *Net) listenForwards() ([]net.Listener, error) {
	return n.listenOn(n.listenAddrs()[1:])
}

// listenOn opens, in the calling thread's namespace, a listener on each
// of addrs, in that order.
func (n *Net) listenOn(addrs []string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, &NamespaceError{Op: "listen on " + a, Err: err, Missing: "the new namespace refused a loopback listener"}
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// serve serves the listeners of listenAddrs (the proxy's first) from
// goroutines of the host's namespace.
func (n *Net) serve(ls []net.Listener) {
	p := n.proxy
	p.wg.Add(len(ls))
	go func() {
		defer p.wg.Done()
		p.Serve(ls[0])
	}()
	for _, l := range ls[1:] {
		ap := l.Addr().(*net.TCPAddr).AddrPort()
		ap = unmapPort(ap)
		to, ok := n.dialTo[ap]
		if !ok {
			to = ap.String()
		}
		go func() {
			defer p.wg.Done()
			p.accept(l, func(c net.Conn) { p.forward(c, ap, to) })
		}()
	}
}

// forwardGrace is how long a forwarded connection's client has, once
// the guarded endpoint has finished sending, to close its side.
const forwardGrace = time.Second

// forward splices c, accepted inside the namespace at ap, to the host's
// address to (ap itself, or localhost:PORT). The Guard is asked once
// the dial has reached the guarded endpoint, before anything is sent.
func (p *Proxy) forward(c net.Conn, ap netip.AddrPort, to string) {
	a := Attempt{Time: time.Now(), Method: MethodForward, Host: ap.Addr().String(), Port: int(ap.Port()), Allowed: true}
	up, key, keyed, err := p.cfg.Dials.dial(p.ctx, net.Dialer{Timeout: dialTimeout}, "tcp", to)
	if err == nil {
		up, err = p.tracked(up, key, keyed)
	}
	if err != nil {
		a.Err = err.Error()
	} else {
		defer up.Close()
		ep, guarded := p.guarded(up)
		if guarded {
			peer := c.RemoteAddr().(*net.TCPAddr).AddrPort()
			if why := p.ask(p.cfg.Guard, ep, ap, unmapPort(peer)); why != "" {
				c.Close()
				a.Allowed, a.Err, a.Guarded = false, why, true
				p.record(a)
				return
			}
		}
		// The guarded endpoint's server ending its side ends the
		// connection: the Go tools' endpoint answers one request per
		// connection, and a client (or a copy of its socket) left
		// holding it gets no more from it.
		grace := time.Duration(0)
		if guarded {
			grace = forwardGrace
		}
		a.Sent, a.Received, err = splice(c, c, up, grace)
		a.Err = errText(err)
	}
	a.Duration = time.Since(a.Time)
	p.record(a)
}

// Env returns the variables that send the run's HTTP clients through the
// proxy: HTTP_PROXY, HTTPS_PROXY and ALL_PROXY with their lower-case
// twins, and NO_PROXY (and no_proxy) naming the loopback addresses, which
// inside the namespace hold only the forwarded endpoints, reached
// directly. Append them to the run's environment after the inherited
// ones, or use MergeEnv.
func (n *Net) Env() []string {
	u := n.ProxyURL()
	const noProxy = "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
}

// MergeEnv returns env without any proxy variable Env sets, followed by
// Env, so that an inherited NO_PROXY or a proxy of the host's cannot
// send the run's requests around the sandbox's proxy.
func (n *Net) MergeEnv(env []string) []string {
	ours := n.Env()
	out := make([]string, 0, len(env)+len(ours))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(ours, func(o string) bool { return strings.HasPrefix(o, k+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, ours...)
}

// Attempts returns a copy of the connection attempts recorded so far,
// after Flush: the first MaxRecorded.
func (n *Net) Attempts() []Attempt {
	n.Flush()
	return n.proxy.Attempts()
}

// Dropped returns how many attempts Attempts lacks because MaxRecorded
// were already kept; OnAttempt saw them all.
func (n *Net) Dropped() int { return n.proxy.Dropped() }

// Lost returns how many refusals of direct connections and datagrams
// the kernel dropped before they could be read, or made without the
// answer they are recorded from (a datagram its rate limits left
// unanswered), after Flush: attempts the run made that Attempts lacks,
// each counted once by OnLost.
func (n *Net) Lost() int {
	n.Flush()
	n.directMu.Lock()
	defer n.directMu.Unlock()
	return n.lost
}

// Close records the refused direct connections not yet recorded (Flush),
// stops the proxy and the forwarders, closes their connections and
// returns once every goroutine of the Net has ended, Prepare's included.
// Call it after Enter has returned (or instead of Enter), once the run's
// tree is gone. The namespace itself ends with the last process in it
// and the thread that entered it. A run's mount namespace that a first
// stage sent and MountNamespace did not hand over is released here. The
// packet socket that saw the connections around the proxy is released on
// a goroutine of its own, which ends soon after: the kernel's release of
// a packet socket waits for an RCU grace period (about a millisecond,
// more on a busy host), which would otherwise hold the run's return.
// Once a Net that Prepare gave a namespace is closed, the next runs'
// namespaces are made in the background (nspool_linux.go), on a
// goroutine that is not the Net's.
func (n *Net) Close() error {
	n.prepOnce.Do(func() {}) // no namespace is made after Close
	if n.made != nil {
		<-n.made
		n.nsMu.Lock()
		if n.ns != nil {
			n.ns.Close()
			n.ns = nil // Enter returns ErrClosed from now on
		}
		n.nsMu.Unlock()
	}
	n.Flush()
	if n.wrapped != nil {
		n.stageEnd.Close()
		n.wrapped.Close()
	}
	n.closePlan()
	if ns := n.MountNamespace(); ns != nil {
		ns.Close()
	}
	err := n.proxy.Close()
	n.releaseDirect()
	n.counters.close()
	if n.made != nil {
		refillNamespaces() // the next run's, made now that this one is over
	}
	return err
}

// closePlan closes the host's copy of the private roots' plan, if any.
func (n *Net) closePlan() {
	if n.plan != nil {
		n.plan.Close()
		n.plan = nil
	}
}

// MountNamespace hands over, once Started returned nil, the run's mount
// namespace, which the first stage of WrapPrivate sent where it gave the
// run its private roots (nil otherwise): the caller closes it once the
// run is reaped, so that the namespace's teardown is not on the exit of
// the run's last process. One not handed over is released by Close.
func (n *Net) MountNamespace() *os.File {
	ns := n.mntNS
	n.mntNS = nil
	return ns
}

// PrivateHeld reports, once Started returned nil, whether the first
// stage of WrapPrivate gave the run its private /tmp and /dev/shm.
func (n *Net) PrivateHeld() bool { return n.private }

// PrivateWhy returns, once Started returned nil, why the first stage of
// WrapPrivate could not give the run its private /tmp and /dev/shm, as
// it said: empty where they hold, or where they were not asked for.
func (n *Net) PrivateWhy() string { return n.privateWhy }

// PrivateSkipped returns, once Started returned nil, the links on the way
// to a settings file (and the files they end at) that the first stage of
// WrapPrivate could not hold read-only, each with why (as
// sandbox.Ruleset.Unheld says on the route without a user namespace).
func (n *Net) PrivateSkipped() []string { return n.skipped }
