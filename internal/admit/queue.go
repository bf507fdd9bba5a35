package admit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Queue admits requests to a budget of resources, first come first
// served (see the package documentation). Make one with New; it is safe for
// concurrent use. A nil *Queue admits every request at once and holds
// nothing: its Acquire returns a nil *Grant, whose methods do nothing.
type Queue struct {
	capacity Amounts // fixed by New

	mu sync.Mutex // guards the fields below
	// held is what the grants not yet released hold.
	held Amounts
	// holders counts those grants.
	holders int
	// queue holds the requests waiting for the budget, in order.
	queue list
	// gates are the rate-limit gates by key, closed or still holding
	// waiters; a gate is removed once it has opened.
	gates map[string]*gate
	// gated counts the waiters at all gates.
	gated int
	// ticket numbers requests in the order they started to wait; seq
	// numbers entries into the queue (a request that waited at a gate
	// enters after it arrived).
	ticket, seq uint64
	// The counters of Stats.
	admitted, queued, cancelled, refused uint64
	waitedTotal                          time.Duration

	// check, if not nil, is called with mu held after every change
	// (tests check their invariants there).
	check func(*Queue)
}

// New returns a Queue of the given capacity. A zero field sets no limit on
// that resource: New(Amounts{Memory: 1 << 30}) bounds the memory promised
// at once to 1 GiB and the number of runs not at all. It panics if a
// capacity is negative.
func New(capacity Amounts) *Queue {
	if capacity.negative() {
		panic("admit: negative capacity")
	}
	return &Queue{capacity: capacity}
}

// Capacity returns the capacity the Queue was made with.
func (q *Queue) Capacity() Amounts {
	if q == nil {
		return Amounts{}
	}
	return q.capacity
}

// A Request is what Acquire is asked for.
type Request struct {
	// Need is what the request holds once admitted. A run or a session
	// needs 1 run, and the memory of its limit. A request
	// that needs nothing still waits its turn behind those that came
	// before it. A negative amount panics Acquire.
	Need Amounts

	// Gate, if not "", is the key of the rate-limit gate the request must
	// pass before it joins the queue, such as the backend's name (see
	// CloseGate). "" ignores every gate.
	Gate string

	// OnWait, if not nil, is told where the request stands while it
	// waits: once when the wait starts, then whenever its position (or
	// the time its gate opens) changes. It is called on the goroutine
	// that called Acquire, never once the request is admitted, and never
	// with the Queue's lock held; the Queue does not wait for it, and
	// positions that change while it runs are reported once it returns,
	// the latest only. A request admitted at once is never told. If it
	// panics (or calls runtime.Goexit), the request leaves the queue,
	// holding nothing, and the panic goes on.
	OnWait func(Wait)
}

// A Wait is where a waiting request stands.
type Wait struct {
	// Ahead is how many requests are ahead of it: in the queue for the
	// budget, or at its gate when Gate is set. At 0 it is at the head,
	// waiting for enough to be released.
	Ahead int
	// Gate is the key of the closed gate it waits at, or "" when it
	// waits for the budget.
	Gate string
	// Until is when the gate opens; zero when Gate is "".
	Until time.Time
}

// A Grant is what an admitted request holds, until Release.
type Grant struct {
	q        *Queue
	need     Amounts
	waited   time.Duration
	released atomic.Bool
}

// Waited returns how long the request waited before it was admitted: 0
// for one admitted at once, and for a nil Grant.
func (g *Grant) Waited() time.Duration {
	if g == nil {
		return 0
	}
	return g.waited
}

// Release gives back what the grant holds and admits the waiters that
// now fit, in order. Calls after the first do nothing, so a holder may
// release on every path that ends its use (a session's Close, called
// twice, say). A nil Grant's Release does nothing.
func (g *Grant) Release() {
	if g == nil || g.released.Swap(true) {
		return
	}
	q := g.q
	q.mu.Lock()
	q.give(g.need)
	q.admit()
	q.changed()
	q.mu.Unlock()
}

// Acquire waits until the request fits and every request that came
// before it has been admitted or has given up, then takes what it needs
// and returns a Grant, which the caller must Release. With a Gate that is
// closed, it first waits for the gate to open.
//
// It returns at once, holding nothing, a *TooLargeError when the request
// needs more of a resource than the whole capacity, and a *WaitError
// (wrapping ctx.Err()) when ctx is done before the request is admitted,
// also when it is done already: a request is never admitted under a
// context that was done first, even if it would fit.
func (q *Queue) Acquire(ctx context.Context, r Request) (*Grant, error) {
	if q == nil {
		return nil, nil
	}
	if r.Need.negative() {
		panic("admit: negative need")
	}
	g := &Grant{q: q, need: r.Need}
	done := ctx.Done()

	q.mu.Lock()
	if err := q.tooLarge(r.Need); err != nil {
		q.refused++
		q.mu.Unlock()
		return nil, err
	}
	select {
	case <-done:
		// ctx being done has "happened before" the admission, whether it
		// was done before the call or while the lock was awaited: fail
		// even though the request might fit (as x/sync/semaphore does).
		q.cancelled++
		q.mu.Unlock()
		return nil, &WaitError{Err: ctx.Err()}
	default:
	}
	var gt *gate
	if r.Gate != "" && q.gates != nil {
		gt = q.closedGate(r.Gate, time.Now())
	}
	if gt == nil && q.queue.n == 0 && fits(q.capacity, q.held, r.Need) {
		q.take(r.Need)
		q.admitted++
		q.changed()
		q.mu.Unlock()
		return g, nil
	}
	w := &waiter{
		grant:  g,
		key:    r.Gate,
		watch:  r.OnWait != nil,
		signal: make(chan struct{}, 1),
		start:  time.Now(),
	}
	q.ticket++
	w.ticket = q.ticket
	if gt != nil {
		gt.add(q, w)
	} else {
		q.enqueue(w)
	}
	q.changed()
	q.mu.Unlock()
	return q.wait(ctx, w, r.OnWait)
}

// tooLarge returns a *TooLargeError if need exceeds the capacity of a
// resource, else nil.
func (q *Queue) tooLarge(need Amounts) error {
	c := q.capacity
	if (c.Runs == 0 || need.Runs <= c.Runs) && (c.Memory == 0 || need.Memory <= c.Memory) {
		return nil
	}
	for r := Runs; r <= Memory; r++ {
		if c, n := q.capacity.get(r), need.get(r); c > 0 && n > c {
			return &TooLargeError{Resource: r, Need: n, Capacity: c}
		}
	}
	return nil
}

// take holds need for a new grant. q.mu must be held.
func (q *Queue) take(need Amounts) {
	q.held = q.held.add(need)
	q.holders++
}

// give gives back what a grant held. q.mu must be held.
func (q *Queue) give(need Amounts) {
	q.held = q.held.sub(need)
	q.holders--
	if q.held.negative() || q.holders < 0 {
		panic("admit: released more than held")
	}
}

// enqueue puts w at the tail of the queue. q.mu must be held.
func (q *Queue) enqueue(w *waiter) {
	q.seq++
	w.seq = q.seq
	w.state = queued
	w.gate = nil
	q.queue.pushBack(w)
}

// admit admits the waiters at the head of the queue while they fit, and
// tells the others their new positions. q.mu must be held.
func (q *Queue) admit() {
	if q.queue.head == nil || !fits(q.capacity, q.held, q.queue.head.grant.need) {
		return
	}
	now := time.Now()
	for q.queue.head != nil && fits(q.capacity, q.held, q.queue.head.grant.need) {
		w := q.queue.popFront()
		q.take(w.grant.need)
		w.state = admitted
		w.grant.waited = now.Sub(w.start)
		q.admitted++
		q.queued++
		q.waitedTotal += w.grant.waited
		w.wake()
	}
	renumber(q.queue.head, 0)
}

// changed runs the test hook, if any. q.mu must be held.
func (q *Queue) changed() {
	if q.check != nil {
		q.check(q)
	}
}

// Stats are a Queue's counters and gauges at one moment.
type Stats struct {
	// Held is what the grants not yet released hold, and Holders how
	// many they are.
	Held    Amounts
	Holders int
	// Waiting is how many requests wait for the budget now, and Gated
	// how many wait at closed rate-limit gates.
	Waiting, Gated int
	// Admitted counts the requests admitted so far, and Queued those of
	// them that waited first.
	Admitted, Queued uint64
	// Cancelled counts the requests that gave up before they were
	// admitted: their context was done (while they waited, or before
	// Acquire was called), or their OnWait panicked. Refused counts those
	// refused as too large. Every Acquire of a Queue
	// counts once in Admitted, Cancelled or Refused.
	Cancelled, Refused uint64
	// WaitedTotal is the time waited, summed over every request that
	// has stopped waiting, admitted or not.
	WaitedTotal time.Duration
}

// Stats returns the Queue's counters and gauges now. A nil Queue's are
// zero.
func (q *Queue) Stats() Stats {
	if q == nil {
		return Stats{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{
		Held: q.held, Holders: q.holders,
		Waiting: q.queue.n, Gated: q.gated,
		Admitted: q.admitted, Queued: q.queued,
		Cancelled: q.cancelled, Refused: q.refused,
		WaitedTotal: q.waitedTotal,
	}
}
