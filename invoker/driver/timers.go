package driver

import (
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// activity is what a turn's timers ask about the CLI: how long it has been
// silent, and whether it waits for the program (an Approve callback is
// deciding), which is not its silence.
type activity interface {
	quiet() time.Duration
	deciding() bool
}

// turnTimers are a turn's first-event and idle timeouts
// (Options.FirstEventTimeout, Options.IdleTimeout). They read the time
// through package time only, and the CLI's activity through an interface,
// so that testing/synctest runs them in a bubble. Only the goroutine that
// awaits the turn uses them.
type turnTimers struct {
	a             activity
	idle, firstD  time.Duration // zero: no such timeout
	first, idleT  *time.Timer
	firstC, idleC <-chan time.Time // fire when the timeout may be due; nil when it cannot be
}

func newTurnTimers(first, idle time.Duration, a activity) *turnTimers {
	t := &turnTimers{a: a, idle: idle, firstD: first}
	if first > 0 {
		t.first = time.NewTimer(first)
		t.firstC = t.first.C
	}
	if idle > 0 {
		t.idleT = time.NewTimer(idle)
		t.idleC = t.idleT.C
	}
	return t
}

// firstEvent stops the first-event timeout: the turn's first event came.
func (t *turnTimers) firstEvent() {
	if t.first != nil {
		t.first.Stop()
		t.firstC = nil
	}
}

// firstDue is called when the first-event timer fires: it returns the
// timeout's error, unless first (closed at the turn's first event) shows
// that the event came in time after all, or the CLI waits for the
// program, which restarts the timeout.
func (t *turnTimers) firstDue(first <-chan struct{}) error {
	if t.a.deciding() {
		// The CLI waits for the program's decision, not the other way
		// round: the wait is not the CLI's silence.
		t.first.Reset(t.firstD)
		return nil
	}
	t.firstC = nil
	select {
	case <-first:
		return nil
	default:
		return fmt.Errorf("%w (%v)", invoker.ErrFirstEventTimeout, t.firstD)
	}
}

// idleDue is called when the idle timer fires: it returns the timeout's
// error if the CLI has been silent for the idle timeout, and if not, sets
// the timer for the rest of it and returns nil. Time the CLI spends
// waiting for an Approve callback is not silence.
func (t *turnTimers) idleDue() error {
	if t.a.deciding() {
		// Waiting for Approve (a person, maybe) is not the CLI's
		// silence; the idle time counts again once it has decided.
		t.idleT.Reset(t.idle)
		return nil
	}
	quiet := t.a.quiet()
	if quiet >= t.idle {
		t.idleC = nil
		return fmt.Errorf("%w (%v)", invoker.ErrIdleTimeout, t.idle)
	}
	t.idleT.Reset(t.idle - quiet)
	return nil
}

// stop stops both timers; neither fires after.
func (t *turnTimers) stop() {
	for _, tm := range []*time.Timer{t.first, t.idleT} {
		if tm != nil {
			tm.Stop()
		}
	}
	t.firstC, t.idleC = nil, nil
}
