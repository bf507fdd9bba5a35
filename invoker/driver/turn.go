package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/invoker"
)

// decide is the part of a turn's verdict that both drivers share, so that
// the same output of the CLI gives the same outcome through Invoke and
// through Session.Turn. It weighs what the CLI reported about the turn
// (out), why the turn was stopped (stopErr, nil when it was not), the
// stdout lines skipped during it, and the schema its answer must satisfy;
// it fills res.Structured. Success needs the CLI's terminal success event
// and nothing skipped. done is false when none of that decides (the CLI
// neither ended the turn in its own terms nor was stopped), and the driver
// says what it knows instead: the exit status of a one-turn run, no result
// for a session's turn.
func decide(out *Outcome, stopErr error, skipped *lineTooLongError, schema *jsonschema.Resolved, res *invoker.Result) (err error, done bool) {
	switch {
	case out.Success && skipped == nil:
		// The CLI reported success before any stop took effect: the turn
		// is complete, and nothing of it is lost. Its answer must still
		// satisfy the OutputSchema, if one is set.
		res.Structured, err = structured(schema, out)
		return err, true
	case stopErr != nil:
		return stopErr, true
	case out.Err != nil:
		return rateLimited(out, res), true
	case out.Success:
		// The terminal event came, but a line before it was skipped: it
		// may have held (part of) the answer, which is then lost.
		skipped.success = true
		return skipped, true
	}
	return nil, false
}

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

// rateLimited returns out.Err, as a *LimitError for ErrRateLimited when it
// matches that sentinel and is not one already: a rate limit is a limit
// the turn reached, with the session to resume and when it resets.
func rateLimited(out *Outcome, res *invoker.Result) error {
	var le *invoker.LimitError
	if !errors.Is(out.Err, invoker.ErrRateLimited) || errors.As(out.Err, &le) {
		return out.Err
	}
	id := res.SessionID
	if id == "" {
		id = out.SessionID
	}
	return &invoker.LimitError{Limit: invoker.ErrRateLimited, SessionID: id, ResetsAt: out.ResetsAt, Err: out.Err}
}
