package admit

import (
	"context"
	"time"
)

// A waiter is a request that waits: at a gate, then in the queue. Its
// fields are guarded by the Queue's mu, but for signal.
type waiter struct {
	grant *Grant // what it will hold; grant.need is its need
	key   string // its gate's key, "" for none
	watch bool   // it has an OnWait to tell of position changes

	state state
	// prev and next link it in the list it is in: its gate's, or the
	// queue; pos is its index there.
	prev, next *waiter
	pos        int
	// gate is the gate it waits at (state gated).
	gate *gate
	// ticket is its arrival number, seq its number of entry into the
	// queue.
	ticket, seq uint64
	// start is when it started to wait.
	start time.Time

	// signal wakes its goroutine: it was admitted, moved, or its position
	// changed. It holds one token, and a wake with a token already there
	// adds nothing: a waiter reads its latest state, however many changes
	// were made while it was busy, and the Queue never blocks on it.
	signal chan struct{}
}

// state is where a waiter is.
type state int

const (
	gated    state = iota + 1 // at a closed gate
	queued                    // in the queue for the budget
	admitted                  // it holds its grant
	gone                      // it gave up
)

// wake tells w's goroutine to look at its state again, without blocking.
func (w *waiter) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// wait waits on the caller's goroutine until w is admitted or ctx is
// done, telling onWait where w stands.
func (q *Queue) wait(ctx context.Context, w *waiter, onWait func(Wait)) (g *Grant, err error) {
	var (
		done   = ctx.Done()
		timer  *time.Timer
		timerC <-chan time.Time
		armed  time.Time // when timer fires, while timerC is not nil
		told   Wait      // what onWait was last told
		ever   bool      // onWait was told something
		over   bool      // wait returns normally
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if !over {
			// onWait panicked or called runtime.Goexit: leave holding
			// nothing, and let the panic go on.
			q.leave(w)
		}
	}()
	for {
		q.mu.Lock()
		st, now := w.state, Wait{Ahead: w.pos}
		if st == gated {
			now.Gate, now.Until = w.key, w.gate.until
		}
		q.mu.Unlock()

		if st == admitted {
			select {
			case <-done:
				// Admitted, but ctx was done meanwhile: whichever came
				// first, the caller has given up; give the grant back.
				over = true
				return nil, q.leave(w).withErr(ctx.Err())
			default:
			}
			over = true
			return w.grant, nil
		}
		if st == gated && !armed.Equal(now.Until) {
			d := time.Until(now.Until)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timerC, armed = timer.C, now.Until
		} else if st != gated && timerC != nil {
			timer.Stop()
			timerC, armed = nil, time.Time{}
		}
		if onWait != nil && (!ever || !now.equal(told)) {
			ever, told = true, now
			onWait(now)
			continue // read the state again: it may have changed meanwhile
		}

		select {
		case <-done:
			over = true
			return nil, q.leave(w).withErr(ctx.Err())
		case <-w.signal:
		case <-timerC:
			timerC, armed = nil, time.Time{}
			q.mu.Lock()
			if w.state == gated {
				q.openIfDue(w.gate, time.Now())
			}
			q.mu.Unlock()
		}
	}
}

// leave takes w out of wherever it waits, or gives back its grant if it
// was admitted, and says where it was. Nothing is held for w afterwards.
func (q *Queue) leave(w *waiter) *WaitError {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := &WaitError{Ahead: w.pos, Waited: time.Since(w.start)}
	switch w.state {
	case admitted:
		// Its wait was counted when it was admitted; uncount it.
		e.Ahead, e.Waited = 0, w.grant.waited
		q.admitted--
		q.queued--
		q.waitedTotal -= w.grant.waited
		q.give(w.grant.need)
		q.admit()
	case queued:
		head := q.queue.head == w
		q.queue.remove(w)
		if head {
			q.admit() // the next may fit where w did not
		}
	case gated:
		e.Gate, e.Until = w.key, w.gate.until
		w.gate.remove(q, w)
	default:
		return e
	}
	w.state = gone
	q.cancelled++
	q.waitedTotal += e.Waited
	q.changed()
	return e
}

// equal reports whether w and v say the same.
func (w Wait) equal(v Wait) bool {
	return w.Ahead == v.Ahead && w.Gate == v.Gate && w.Until.Equal(v.Until)
}

// withErr sets e's Err and returns e.
func (e *WaitError) withErr(err error) *WaitError {
	e.Err = err
	return e
}
