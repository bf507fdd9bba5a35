// Package ahead keeps things a run needs made ahead of the run, off its
// start path: a Pool makes them in the background once runs follow each
// other, hands a kept one to the next run that asks if it is still fit,
// and releases what no run took once it has waited long enough.
//
// A Pool makes nothing for a process's first run: it starts making ahead
// from the second Get or Take on, so that a program with one run makes
// nothing it never uses. What it keeps is used by one run only, never
// given back.
package ahead

import (
	"sync"
	"time"
)

// Config says what a Pool keeps and how it makes, checks and releases
// it.
type Config[T any] struct {
	// Size bounds the things kept ready; 0 means 1.
	Size int
	// Idle is how long kept things outlive the last use of the pool (a
	// Get, a Take, a Fill, a thing made); 0 means they are kept until
	// Drain, Settle or Close.
	Idle time.Duration
	// Make makes one thing, on the filling goroutine (see Go) or on
	// the goroutine calling Get when none kept fits. It is required.
	Make func() (T, error)
	// Check, if not nil, reports whether a kept thing may still be
	// taken: it runs on the goroutine calling Get or Take, which may use
	// it to ready the thing for its use there. A thing it refuses is
	// released.
	Check func(T) bool
	// Release releases a thing no run took, or that Check refused. It
	// is required.
	Release func(T)
	// Go, if not nil, runs the filling goroutine's function (on a
	// thread of its own, say); nil means a plain go statement. The
	// function makes, one after another, the things the pool lacks. Go
	// is called without the pool's lock held, so it may run the function
	// before it returns.
	Go func(func())
}

// A Pool keeps up to Size things made ahead. Its methods may be called
// from any goroutine. Make one with New.
type Pool[T any] struct {
	cfg Config[T]

	mu    sync.Mutex
	ready []T
	// filling says that a goroutine is making things; drained that
	// the kept ones were released since the last use (it releases
	// what it makes then).
	filling, drained bool
	closed           bool
	runs             int         // Gets and Takes, up to 2
	last             time.Time   // the pool's last use (touch)
	idle             *time.Timer // releases the kept things (idled)
	// filled is closed once the filling goroutine ends; nil before the
	// first.
	filled chan struct{}
	// releasing counts the Drains releasing things now; released is
	// signalled, under mu, as each ends (Settle waits for them).
	releasing int
	released  *sync.Cond
}

// testHookSettleWait, if not nil, is called by Settle each time it
// waits for a Drain releasing things on another goroutine.
var testHookSettleWait func()

// pools are the open Pools of the process, for SettleAll.
var pools struct {
	mu  sync.Mutex
	all map[any]func()
}

// New returns a Pool of what cfg says, keeping nothing yet.
func New[T any](cfg Config[T]) *Pool[T] {
	if cfg.Size <= 0 {
		cfg.Size = 1
	}
	if cfg.Go == nil {
		cfg.Go = func(f func()) { go f() }
	}
	if cfg.Make == nil || cfg.Release == nil {
		panic("ahead: New with a Config whose Make or Release is nil")
	}
	p := &Pool[T]{cfg: cfg}
	p.released = sync.NewCond(&p.mu)
	pools.mu.Lock()
	if pools.all == nil {
		pools.all = map[any]func(){}
	}
	pools.all[p] = p.Settle
	pools.mu.Unlock()
	return p
}

// Take returns a kept thing that Check finds fit, and true; else, where
// none is kept or Check refused every one (each is then released), the
// zero T and false. It counts a run of the process: Fill makes things
// from the second on.
func (p *Pool[T]) Take() (T, bool) {
	var zero T
	p.mu.Lock()
	p.touch()
	p.runs = min(p.runs+1, 2)
	p.mu.Unlock()
	for {
		p.mu.Lock()
		n := len(p.ready)
		if n == 0 {
			p.mu.Unlock()
			return zero, false
		}
		t := p.ready[n-1]
		p.ready[n-1] = zero
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		if p.cfg.Check == nil || p.cfg.Check(t) {
			return t, true
		}
		p.cfg.Release(t)
	}
}

// Get is Take, or, where it returns nothing, Make on the calling
// goroutine.
func (p *Pool[T]) Get() (T, error) {
	if t, ok := p.Take(); ok {
		return t, nil
	}
	return p.cfg.Make()
}

// Fill makes, on a goroutine of its own (Config.Go), the things the pool
// lacks, unless one is at it already, the pool is closed, or runs do not
// follow each other yet (before the second Get or Take).
func (p *Pool[T]) Fill() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.touch()
	if p.filling || len(p.ready) >= p.cfg.Size || p.runs < 2 {
		p.mu.Unlock()
		return
	}
	p.filling = true
	done := make(chan struct{})
	p.filled = done
	p.mu.Unlock()
	p.cfg.Go(func() {
		defer close(done)
		p.fill()
	})
}

// fill is Fill's work: it makes things until the pool is full, Make
// fails (a run that finds none makes its own, and says why it cannot) or
// the pool is drained.
func (p *Pool[T]) fill() {
	for {
		t, err := p.cfg.Make()
		p.mu.Lock()
		if err != nil || p.drained {
			p.filling = false
			p.mu.Unlock()
			if err == nil {
				p.cfg.Release(t)
			}
			return
		}
		p.ready = append(p.ready, t)
		p.touch()
		full := len(p.ready) >= p.cfg.Size
		if full {
			p.filling = false
		}
		p.mu.Unlock()
		if full {
			return
		}
	}
}

// touch, under mu, postpones the release of the kept things.
func (p *Pool[T]) touch() {
	p.drained = false
	p.last = time.Now()
	if p.cfg.Idle <= 0 || p.closed {
		return
	}
	if p.idle == nil {
		p.idle = time.AfterFunc(p.cfg.Idle, p.idled)
	} else {
		p.idle.Reset(p.cfg.Idle)
	}
}

// idled, the idle timer's function, is Drain unless the pool was used
// since the timer was set (the timer, reset, fires again then) or it was
// stopped since it fired (Settle, Close).
func (p *Pool[T]) idled() {
	p.mu.Lock()
	used := p.idle == nil || time.Since(p.last) < p.cfg.Idle
	p.mu.Unlock()
	if !used {
		p.Drain()
	}
}

// Drain releases the kept things, and those a goroutine is making.
func (p *Pool[T]) Drain() {
	p.mu.Lock()
	ts := p.ready
	p.ready = nil
	p.drained = true
	p.releasing++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.releasing--
		p.released.Broadcast()
		p.mu.Unlock()
	}()
	for _, t := range ts {
		p.cfg.Release(t)
	}
}

// Settle waits until no goroutine is making things, releases the kept
// ones, stops the idle timer and waits for a release under way on
// another goroutine (the timer's, fired just before): until the pool is
// used again, it holds nothing and releases nothing. The pool is used as
// before afterwards.
func (p *Pool[T]) Settle() {
	p.Wait()
	p.Drain()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle != nil {
		p.idle.Stop()
		p.idle = nil
	}
	for p.releasing > 0 {
		if testHookSettleWait != nil {
			testHookSettleWait()
		}
		p.released.Wait()
	}
}

// Close settles the pool for good: Fill makes nothing from now on, Take
// finds nothing, and Get makes each thing on its caller.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Settle()
	pools.mu.Lock()
	delete(pools.all, p)
	pools.mu.Unlock()
}

// Kept returns a copy of the things kept ready now.
func (p *Pool[T]) Kept() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]T(nil), p.ready...)
}

// Wait returns once no goroutine is making things for the pool.
func (p *Pool[T]) Wait() {
	p.mu.Lock()
	done := p.filled
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

// OnSettle adds f, which releases what a package keeps made ahead beside
// a Pool, to what SettleAll does, for the life of the process. A timer
// of that package's still pending after f must then find nothing to do
// (internal/proc's batch of removals leaves its flush scheduled, to find
// an empty queue).
func OnSettle(f func()) {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	if pools.all == nil {
		pools.all = map[any]func(){}
	}
	pools.all[&f] = f
}

// SettleAll settles (Settle) every Pool of the process not closed, and
// runs the functions given to OnSettle: a test that counts the process's
// descriptors, or lowers its limit to them, then finds none made or
// released behind its back, until a run uses a pool again.
func SettleAll() {
	pools.mu.Lock()
	fs := make([]func(), 0, len(pools.all))
	for _, f := range pools.all {
		fs = append(fs, f)
	}
	pools.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
