package egress

import (
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/ahead"
	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// The network namespaces of Enter's route are made ahead, off the run's
// path: making one (unshare, the loopback brought up, the catch-all
// route's rules and routes, its packet socket, the counters' files) costs
// about a millisecond of CPU, most of it the kernel's, which a run would
// otherwise spend while it starts. Up to nsPoolSize namespaces are kept
// ready, made by a goroutine that a Net starts once its run has started
// (Running) or is over (Close), on a thread of its own that ends once
// they are made; Prepare takes one and joins it to open the run's
// listeners there, and makes its own only when none is ready (the first
// run, or many at once).
//
// A namespace is used by one run only, never kept after it: a run can
// leave state in its namespace (sockets, connections waiting to be
// closed, counters), and a new one starts with none. Until it is taken,
// nothing runs in a kept namespace and nothing but its loopback exists
// there: its packet socket sees nothing, its counters stay at zero. The
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
}

// makeReady moves the calling thread, locked and retired (it runs
// nothing else afterwards), into a new network namespace and sets it up:
// the loopback up, the catch-all route and its packet socket, the
// counters opened from inside.
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
	return r, nil
}

// close releases a namespace no run took, or that the run could not use.
func (r *readyNS) close() {
	r.ns.Close()
	if r.direct >= 0 {
		unix.Close(r.direct)
	}
	r.counters.close()
}

// namespaces is the process's pool of namespaces made ahead.
var namespaces = newNamespacePool()

// newNamespacePool returns a pool that keeps nsPoolSize namespaces, made
// on a retired thread of its own (sandbox.GoRetired): each one it makes
// moves the thread into a new namespace. A kept namespace is taken only
// if the taking thread can join it.
func newNamespacePool() *ahead.Pool[*readyNS] {
	return ahead.New(ahead.Config[*readyNS]{
		Size:    nsPoolSize,
		Idle:    nsPoolIdle,
		Make:    makeReady,
		Check:   func(r *readyNS) bool { return joinNamespace(r.ns) == nil },
		Release: (*readyNS).close,
		Go:      sandbox.GoRetired,
	})
}

// makeNamespace is Prepare's work, on its locked thread: it moves the
// thread into the run's network namespace (a kept one, else one it
// makes), opens the listeners there, starts serving them and recording
// the connections around the proxy, and returns a file of the namespace
// for Enter to join.
func (n *Net) makeNamespace() (*os.File, error) {
	r, err := namespaces.Get() // joined, or made here
	if err != nil {
		return nil, err
	}
	// Listen on this thread, in the namespace; the accept loops run on
	// other goroutines, whose sockets (the dials) are the host's.
	ls, err := n.listen()
	if err != nil {
		r.close()
		return nil, err
	}
	n.serve(ls)
	if r.directErr != nil {
		n.bypassErr = r.directErr
	} else {
		n.counters = r.counters
		n.recordDirect(r.direct)
	}
	return r.ns, nil
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
