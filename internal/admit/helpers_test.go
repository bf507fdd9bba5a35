package admit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
)

const MiB = 1 << 20

// newChecked returns a Queue of capacity c whose invariants are checked
// after every change, failing t when one breaks.
func newChecked(t testing.TB, c Amounts) *Queue {
	t.Helper()
	q := New(c)
	q.check = func(q *Queue) {
		if err := q.invariants(); err != nil {
			t.Errorf("after a change: %v", err)
		}
	}
	return q
}

// invariants checks what must hold whenever q.mu is not held by a
// change under way: nothing over capacity, the lists well formed and in
// order, and no waiter left at the head of the queue that would fit (a
// lost wake-up). q.mu must be held.
func (q *Queue) invariants() error {
	if q.held.negative() || q.holders < 0 {
		return fmt.Errorf("held %+v by %d holders", q.held, q.holders)
	}
	for r := Runs; r <= Memory; r++ {
		if c := q.capacity.get(r); c > 0 && q.held.get(r) > c {
			return fmt.Errorf("%s held %d, over the capacity %d", r, q.held.get(r), c)
		}
	}
	if err := q.queue.wellFormed(queued, nil, func(a, b *waiter) bool { return a.seq < b.seq }); err != nil {
		return fmt.Errorf("queue: %v", err)
	}
	if h := q.queue.head; h != nil && fits(q.capacity, q.held, h.grant.need) {
		return fmt.Errorf("the head of the queue (%+v) fits in %+v held of %+v, and waits", h.grant.need, q.held, q.capacity)
	}
	nGated := 0
	for key, g := range q.gates {
		if g.key != key {
			return fmt.Errorf("gate %q filed under %q", g.key, key)
		}
		if err := g.waiters.wellFormed(gated, g, func(a, b *waiter) bool { return a.ticket < b.ticket }); err != nil {
			return fmt.Errorf("gate %q: %v", key, err)
		}
		for w := g.waiters.head; w != nil; w = w.next {
			if w.key != key {
				return fmt.Errorf("gate %q holds a waiter of %q", key, w.key)
			}
		}
		nGated += g.waiters.n
	}
	if nGated != q.gated {
		return fmt.Errorf("%d waiters at gates, counted %d", nGated, q.gated)
	}
	return nil
}

// wellFormed checks l's links, count, positions, states and order.
func (l *list) wellFormed(st state, g *gate, before func(a, b *waiter) bool) error {
	n := 0
	var prev *waiter
	for w := l.head; w != nil; prev, w = w, w.next {
		switch {
		case w.prev != prev:
			return fmt.Errorf("waiter %d: prev link broken", n)
		case w.pos != n:
			return fmt.Errorf("waiter %d: pos %d", n, w.pos)
		case w.state != st:
			return fmt.Errorf("waiter %d: state %d, want %d", n, w.state, st)
		case w.gate != g:
			return fmt.Errorf("waiter %d: gate %p, want %p", n, w.gate, g)
		case prev != nil && !before(prev, w):
			return fmt.Errorf("waiter %d out of order", n)
		}
		n++
	}
	if l.tail != prev || l.n != n {
		return fmt.Errorf("tail or count (%d, counted %d) wrong", l.n, n)
	}
	return nil
}

// A waitLog records what OnWait is told, for one request.
type waitLog struct {
	mu    sync.Mutex
	waits []Wait
}

func (l *waitLog) onWait(w Wait) {
	l.mu.Lock()
	l.waits = append(l.waits, w)
	l.mu.Unlock()
}

func (l *waitLog) get() []Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Wait(nil), l.waits...)
}

// last returns the last Wait told, or a zero Wait and false.
func (l *waitLog) last() (Wait, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waits) == 0 {
		return Wait{}, false
	}
	return l.waits[len(l.waits)-1], true
}

// A pending is an Acquire running on a goroutine of its own.
type pending struct {
	log    waitLog
	cancel context.CancelFunc
	done   chan struct{}
	g      *Grant
	err    error
}

// start calls Acquire for r on a new goroutine, with OnWait logged, and
// (in a synctest bubble) waits until it is admitted or blocked.
func start(t *testing.T, q *Queue, r Request) *pending {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	p := &pending{cancel: cancel, done: make(chan struct{})}
	if r.OnWait == nil {
		r.OnWait = p.log.onWait
	}
	go func() {
		defer close(p.done)
		p.g, p.err = q.Acquire(ctx, r)
	}()
	synctest.Wait()
	t.Cleanup(func() {
		cancel()
		<-p.done
		p.g.Release()
	})
	return p
}

// admitted reports whether p's Acquire has returned a Grant; it fails t
// if it returned an error.
func (p *pending) admitted(t *testing.T) bool {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("Acquire() error = %v, want a grant", p.err)
		}
		return true
	default:
		return false
	}
}

// waitErr waits for p's Acquire to return and returns its *WaitError,
// failing t for anything else.
func (p *pending) waitErr(t *testing.T) *WaitError {
	t.Helper()
	<-p.done
	var we *WaitError
	if !errors.As(p.err, &we) {
		t.Fatalf("Acquire() = %v, %v; want a *WaitError", p.g, p.err)
	}
	if p.g != nil {
		t.Errorf("Acquire() returned a grant with its error")
	}
	return we
}

// mustAcquire acquires need at once, or fails t.
func mustAcquire(t *testing.T, q *Queue, need Amounts) *Grant {
	t.Helper()
	g, err := q.Acquire(t.Context(), Request{Need: need})
	if err != nil {
		t.Fatalf("Acquire(%+v) error = %v", need, err)
	}
	if g.Waited() != 0 {
		t.Errorf("Acquire(%+v) waited %v, want 0 for a request that fits", need, g.Waited())
	}
	return g
}

// run is the need of a run of mem bytes.
func run(mem int64) Amounts { return Amounts{Runs: 1, Memory: mem} }
