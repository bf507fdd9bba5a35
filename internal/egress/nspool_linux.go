package egress

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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
// kept namespaces are released once no run has taken one for
// nsPoolIdle.
//
// The route without CAP_SYS_ADMIN (Wrap) has no such pool: its network
// namespace is made by the clone of the run's first stage, inside the
// run's new user namespace, and belongs to that user namespace; one made
// ahead would need a first stage started ahead.
const (
	// nsPoolSize bounds the namespaces kept ready.
	nsPoolSize = 2
	// nsPoolIdle is how long kept namespaces outlive the last run that
	// took one or ended.
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

// nsPool holds the namespaces made ahead.
type nsPool struct {
	mu    sync.Mutex
	ready []*readyNS
	// filling says that a goroutine is making namespaces; drained that
	// the kept ones were released since (it releases what it makes
	// then).
	filling, drained bool
	takes            int         // the runs that asked for one, up to 2
	last             time.Time   // when the pool was last used (touch)
	idle             *time.Timer // releases the kept namespaces (drain)
	fillers          sync.WaitGroup
}

// namespaces is the process's pool.
var namespaces nsPool

// take returns a kept namespace, or nil if none is ready.
func (p *nsPool) take() *readyNS {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch()
	p.takes = min(p.takes+1, 2)
	n := len(p.ready)
	if n == 0 {
		return nil
	}
	r := p.ready[n-1]
	p.ready[n-1] = nil
	p.ready = p.ready[:n-1]
	return r
}

// touch, under mu, postpones the release of the kept namespaces.
func (p *nsPool) touch() {
	p.drained = false
	p.last = time.Now()
	if p.idle == nil {
		p.idle = time.AfterFunc(nsPoolIdle, p.idled)
	} else {
		p.idle.Reset(nsPoolIdle)
	}
}

// refill makes, on a thread of its own, the namespaces the pool lacks,
// unless a goroutine is already at it or runs do not follow each other
// yet: before a process's second run, so that a program with one run
// makes none it never uses.
func (p *nsPool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch()
	if p.filling || len(p.ready) >= nsPoolSize || p.takes < 2 {
		return
	}
	p.filling = true
	p.fillers.Add(1)
	sandbox.GoRetired(p.fill)
}

// fill is refill's work, on a locked thread that ends with it: each
// namespace it makes moves the thread into a new one.
func (p *nsPool) fill() {
	defer p.fillers.Done()
	for {
		r, err := makeReady()
		p.mu.Lock()
		if err != nil || p.drained {
			p.filling = false
			p.mu.Unlock()
			if r != nil {
				r.close()
			}
			return // a run that finds none makes its own, and says why it cannot
		}
		p.ready = append(p.ready, r)
		full := len(p.ready) >= nsPoolSize
		if full {
			p.filling = false
		}
		p.mu.Unlock()
		if full {
			return
		}
	}
}

// idled, the idle timer's function, is drain unless the pool was used
// since the timer was set (the timer, reset, fires again).
func (p *nsPool) idled() {
	p.mu.Lock()
	used := time.Since(p.last) < nsPoolIdle
	p.mu.Unlock()
	if !used {
		p.drain()
	}
}

// drain releases the kept namespaces, and those a goroutine is making.
func (p *nsPool) drain() {
	p.mu.Lock()
	rs := p.ready
	p.ready = nil
	p.drained = true
	p.mu.Unlock()
	for _, r := range rs {
		r.close()
	}
}

// makeNamespace is Prepare's work, on its locked thread: it moves the
// thread into the run's network namespace (a kept one, else one it
// makes), opens the listeners there, starts serving them and recording
// the connections around the proxy, and returns a file of the namespace
// for Enter to join.
func (n *Net) makeNamespace() (*os.File, error) {
	r := namespaces.take()
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
func refillNamespaces() { namespaces.refill() }

// Running tells the Net, on Enter's route, that the run's first process
// has started: the namespaces of the next runs are then made in the
// background, off this run's start and, where this run lasts, off the
// next run's (Close has them made too, for a run that never started). On
// Wrap's route, and after Close, it does nothing.
func (n *Net) Running() {
	if n.made != nil && n.wrapped == nil {
		refillNamespaces()
	}
}
