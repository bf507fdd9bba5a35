package driver

import (
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// turnTimers are a turn's first-event and idle timeouts.
type turnTimers struct {
	r             *run
	idle, firstD  time.Duration
	first, idleT  *time.Timer
	firstC, idleC <-chan time.Time
}

func newTurnTimers(cfg *config, r *run) *turnTimers {
	t := &turnTimers{r: r, idle: cfg.idleTimeout, firstD: cfg.firstEventTimeout}
	if d := cfg.firstEventTimeout; d > 0 {
		t.first = time.NewTimer(d)
		t.firstC = t.first.C
	}
	if t.idle > 0 {
		t.idleT = time.NewTimer(t.idle)
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
// that the event came in time after all.
func (t *turnTimers) firstDue(first <-chan struct{}) error {
	if t.r.approving.Load() > 0 {
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
	if t.r.approving.Load() > 0 {
		// Waiting for Approve (a person, maybe) is not the CLI's
		// silence; the idle time counts again once it has decided.
		t.idleT.Reset(t.idle)
		return nil
	}
	quiet := t.r.quiet()
	if quiet >= t.idle {
		t.idleC = nil
		return fmt.Errorf("%w (%v)", invoker.ErrIdleTimeout, t.idle)
	}
	t.idleT.Reset(t.idle - quiet)
	return nil
}

func (t *turnTimers) stop() {
	for _, tm := range []*time.Timer{t.first, t.idleT} {
		if tm != nil {
			tm.Stop()
		}
	}
	t.firstC, t.idleC = nil, nil
}
