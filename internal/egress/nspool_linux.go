package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/ahead"
	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// The network namespaces of Enter's route are made ahead, off the run's
// path: making one (unshare, the loopback brought up, the catch-all
// route's rules and routes, its packet socket, the counters' files, the
// proxy's listener) costs about a millisecond of CPU, most of it the
// kernel's, which a run would otherwise spend while it starts. Up to
// nsPoolSize namespaces are kept ready, made by a goroutine that a Net
// starts once its run has started (Running) or is over (Close), on a
// thread of its own that ends once they are made. Prepare takes one; a
// run with no loopback endpoint to forward finds everything it needs
// there, the proxy's listener on ProxyPort included, and takes it on the
// calling goroutine, with no thread of its own and no wait for Enter; a
// run with some opens their listeners there as Prepare returns too, from
// a thread of the runtime's that visits the namespace and comes back
// (listenIn), and joins it on a thread of its own only where that visit
// fails. A run makes its own only when none is ready (the first run, or
// many at once).
//
// A namespace is used by one run only, never kept after it: a run can
// leave state in its namespace (sockets, connections waiting to be
// closed, counters), and a new one starts with none. Until it is taken,
// nothing runs in a kept namespace and nothing but its loopback and the
// proxy's listener exists there: no process can connect to the listener,
// its packet socket sees nothing, its counters stay at zero. The
// kept namespaces are released once nsPoolIdle has passed with no run
// taking one, starting or ending (internal/ahead's Pool holds them).
//
// The route without CAP_SYS_ADMIN (Wrap) has no such pool: its network
// namespace is made by the clone of the run's first stage, inside the
// run's new user namespace, and belongs to that user namespace; one made
// ahead would need a first stage started ahead.
const (
	// nsPoolSize bounds the namespaces kept ready.
	nsPoolSize = 2
	// nsPoolIdle is how long kept namespaces outlive the last run that
	// took one, started or ended.
	nsPoolIdle = time.Minute
)

// A readyNS is a network namespace set up for a run, not yet taken.
type readyNS struct {
	ns        *os.File  // the namespace
	direct    int       // the catch-all route's packet socket, or -1
	directErr error     // why there is none
	counters  *counters // the namespace's counters, or nil
	// proxy is the proxy's listener at 127.0.0.1:ProxyPort, opened in
	// the namespace; nil where it could not be (the run then opens its
	// own, and says why it cannot).
	proxy net.Listener
}

// makeReady moves the calling thread, locked and retired (it runs
// nothing else afterwards), into a new network namespace and sets it up:
// the loopback up, the catch-all route and its packet socket, the
// counters opened from inside, the proxy's listener on ProxyPort.
func makeReady() (*readyNS, error) {
	if err := enterNamespace(); err != nil {
		return nil, err
	}
	ns, err := openNamespace()
	if err != nil {
		return nil, err
	}
	r := &readyNS{ns: ns}
	if r.direct, r.directErr = catchDirect(); r.directErr == nil {
		r.counters = openCounters("/proc/thread-self/net")
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ProxyPort))); err == nil {
		r.proxy = l
	}
	return r, nil
}

// close releases a namespace no run took, or that the run could not use.
func (r *readyNS) close() {
	r.ns.Close()
	if r.direct >= 0 {
		unix.Close(r.direct)
	}
	r.counters.close()
	if r.proxy != nil {
		r.proxy.Close()
	}
}

// namespaces is the process's pool of namespaces made ahead.
var namespaces = newNamespacePool()

// newNamespacePool returns a pool that keeps nsPoolSize namespaces, made
// on a retired thread of its own (sandbox.GoRetired): each one it makes
// moves the thread into a new namespace. A kept namespace is not checked
// as it is taken: it is joined by the thread that forks the run (Join),
// where a failure fails the run, and, for a run with endpoints to forward,
// first by Prepare's thread, which releases one it cannot join and makes
// its own (makeNamespace).
func newNamespacePool() *ahead.Pool[*readyNS] {
	return ahead.New(ahead.Config[*readyNS]{
		Size:    nsPoolSize,
		Idle:    nsPoolIdle,
		Make:    makeReady,
		Release: (*readyNS).close,
		Go:      sandbox.GoRetired,
	})
}

// prepareKept is Prepare's work on its calling goroutine: it takes a
// kept namespace, if any, and where that holds the run's listener on its
// proxy port uses it there and returns nil: the loopback endpoints to
// forward, if any, get their listeners from a visit to the namespace
// (listenIn). Otherwise (no namespace kept, the proxy on another port, a
// visit that failed) it returns the rest of the work, for a thread of
// Prepare's own: makeNamespace, with the namespace taken or nil.
func (n *Net) prepareKept() func() (*os.File, error) {
	r, ok := namespaces.Take()
	if !ok {
		r = nil
	} else if r.proxy != nil && n.port == ProxyPort {
		ls := []net.Listener{r.proxy}
		if len(n.forwards) > 0 {
			fw, err := listenIn(r.ns, n.listenForwards)
			if err != nil {
				return func() (*os.File, error) { return n.makeNamespace(r) }
			}
			ls = append(ls, fw...)
		}
		n.ns = r.ns
		n.use(r, ls)
		return nil
	}
	return func() (*os.File, error) { return n.makeNamespace(r) }
}

// visitFault, if not nil, is asked by listenIn once its thread is in the
// namespace, before it listens: a test makes the visit fail there.
var visitFault func() error

// listenIn calls listen on a thread that visits the network namespace ns
// and comes back: a goroutine of its own, locked to a thread the runtime
// has already (none is made for it), moves that thread into ns, listens
// there and moves it back into the namespace it left; the thread is
// unlocked, to run other goroutines again, only once it is back. Where it
// cannot go back, the goroutine ends locked and the runtime ends the
// thread with it. It returns listen's listeners, or an error, with every
// listener it opened closed, where the thread could not visit ns (the
// caller then joins it on a thread of its own) or listen failed. It never
// moves the process's main thread, whose namespace /proc/self shows: a
// goroutine that finds itself there hands the visit to another, which
// cannot run there while the first holds it (as sandbox.GoRetired does).
func listenIn(ns *os.File, listen func() ([]net.Listener, error)) ([]net.Listener, error) {
	done := make(chan visited, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			done <- visitLocked(ns, listen)
			return
		}
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			done <- visitLocked(ns, listen)
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
	r := <-done
	return r.ls, r.err
}

// visited is what a visit of listenIn's opened, or why it failed.
type visited struct {
	ls  []net.Listener
	err error
}

// visitLocked is listenIn's visit on the calling goroutine's locked
// thread: it unlocks the thread once it is back, and leaves it locked
// (to end with the goroutine, which must return next) where it is not.
func visitLocked(ns *os.File, listen func() ([]net.Listener, error)) visited {
	ls, back, err := visit(ns, listen)
	if back {
		runtime.UnlockOSThread()
	}
	return visited{ls, err}
}

// visit is listenIn's work on its locked thread; back reports whether the
// thread is in the namespace it was in before (where it never left, or
// where it came back). On error it closes what listen opened.
func visit(ns *os.File, listen func() ([]net.Listener, error)) (ls []net.Listener, back bool, err error) {
	if unix.Gettid() == unix.Getpid() {
		return nil, true, errors.New("listenIn: on the main thread")
	}
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("listenIn: the thread's namespace: %w", err)
	}
	defer unix.Close(home)
	if err := joinNamespace(ns); err != nil {
		return nil, true, err
	}
	if visitFault != nil {
		err = visitFault()
	}
	if err == nil {
		ls, err = listen()
	}
	if berr := unix.Setns(home, unix.CLONE_NEWNET); berr != nil {
		for _, l := range ls {
			l.Close()
		}
		return nil, false, errors.Join(err, fmt.Errorf("listenIn: back to the thread's namespace: %w", berr))
	}
	return ls, true, err
}

// makeNamespace is the rest of Prepare's work where prepareKept did not
// do it all, on Prepare's locked thread: it moves the thread into the
// run's network namespace (r, a kept one, if not nil and the thread can
// join it, else one it makes), opens the listeners there, starts
// serving them and recording the connections around the proxy, and
// returns a file of the namespace for Enter to join.
func (n *Net) makeNamespace(r *readyNS) (*os.File, error) {
	if r != nil && joinNamespace(r.ns) != nil {
		r.close()
		r = nil
	}
	if r == nil {
		var err error
		if r, err = makeReady(); err != nil {
			return nil, err
		}
	}
	if r.proxy != nil && n.port == ProxyPort {
		// Listen on this thread, in the namespace, for the forwarded
		// endpoints; the proxy's listener is open already.
		ls, err := n.listenForwards()
		if err != nil {
			r.close()
			return nil, err
		}
		n.use(r, append([]net.Listener{r.proxy}, ls...))
		return r.ns, nil
	}
	if r.proxy != nil {
		r.proxy.Close() // another port: the run's own, below
		r.proxy = nil
	}
	// Listen on this thread, in the namespace; the accept loops run on
	// other goroutines, whose sockets (the dials) are the host's.
	ls, err := n.listen()
	if err != nil {
		r.close()
		return nil, err
	}
	n.use(r, ls)
	return r.ns, nil
}

// use serves ls, the listeners of listenAddrs opened in r's namespace,
// and records the connections around the proxy that r's packet socket
// sees.
func (n *Net) use(r *readyNS, ls []net.Listener) {
	n.serve(ls)
	if r.directErr != nil {
		n.bypassErr = r.directErr
	} else {
		n.counters = r.counters
		n.recordDirect(r.direct)
	}
}

// refillNamespaces makes, in the background, the namespaces the pool
// lacks.
func refillNamespaces() { namespaces.Fill() }

// running is Running's: the namespaces of the next runs are made on
// Enter's route only.
func (n *Net) running() {
	if n.made != nil && n.wrapped == nil {
		refillNamespaces()
	}
}
