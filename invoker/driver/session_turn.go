package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/internal/detach"
	"github.com/clinvoke/clinvoke/invoker"
)

// The session as its turns' carrier: Turn checks a turn and runs it (see
// turn.run); begin sends it in the protocol, interrupt asks the CLI to
// end it in the protocol, escalate stops a CLI that did not, verdict
// judges it (verdict.go), and end withdraws what it still asks.

// Turn runs one turn of the session inside its span: a child of the span
// in ctx (the caller's, for an MCP call the client's), linked to the
// session's span, which holds the process's start, ladder and sweep.
func (s *session) Turn(ctx context.Context, tr invoker.TurnRequest) (res *invoker.Result, err error) {
	sreq := s.sreq
	sreq.SessionID = s.ID()
	ctx, sp := s.cfg.tel.begin(ctx, modeTurn, s.cli, &sreq, s.tel.link())
	tr.OnEvent = sp.observe(tr.OnEvent)
	returned := false
	defer func() { sp.end(res, err, !returned) }()
	res, err = s.turn(ctx, tr, true)
	returned = true
	if err != nil {
		err = s.e.named(err)
	}
	return res, err
}

// turn runs the turn tr: checked first when check is set (a run of
// Invoke was checked whole).
func (s *session) turn(ctx context.Context, tr invoker.TurnRequest, check bool) (*invoker.Result, error) {
	t := newTurn(s.cfg, tr, s.sreq.Deltas, s.schema)
	t.end = make(chan struct{})
	t.carry(s, s.r, s.cb, t.end)
	t.res.Containment, t.res.Sandbox = s.r.level(), s.r.sbx.held()
	fail := func(err error) (*invoker.Result, error) {
		t.res.Duration = time.Since(t.start)
		t.res.SessionID = s.ID()
		return t.res, err
	}
	if !s.busy.CompareAndSwap(false, true) {
		return fail(invoker.ErrTurnInProgress)
	}
	defer s.busy.Store(false)
	if check {
		if err := s.checkTurn(&tr); err != nil {
			return fail(err)
		}
	}
	if err := s.usable(); err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return fail(ctxError(ctx))
	}
	res, err := t.run(ctx)
	// The attempts since the turn before: those of the opening, or of
	// the time between turns, go to the next turn.
	res.Connections = s.r.sbx.netRules().connections(s.netSeen)
	s.netSeen += len(res.Connections)
	if err != nil && res.SessionID == "" {
		res.SessionID = s.ID()
	}
	return res, err
}

// usable returns why the session can take no turn, or nil.
func (s *session) usable() error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	select {
	case <-s.r.over():
		return s.closedError()
	default:
		if closing {
			return s.closedError()
		}
	}
	return nil
}

// begin sends the turn's prompt in the protocol. What runs now, with the
// CLI idle between turns, is what it keeps across turns; what the turn
// adds is swept when it is cancelled. A turn the protocol refuses ends
// here, having changed nothing: it sweeps nothing at a lower level, and
// gets no event.
func (s *session) begin(t *turn, ctx context.Context) error {
	t.ctx, t.caller = detach.New(ctx), ctx
	s.protoMu.Lock()
	lines, err := func() (lines [][]byte, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the session protocol failed to start a turn: %v", p)
			}
		}()
		return s.proto.StartTurn(&t.req)
	}()
	s.protoMu.Unlock()
	if err != nil {
		t.ctx.Cancel(errTurnOver)
		return asInvalid(err)
	}
	// The turn is taken; its prompt has not gone yet, and what the CLI
	// prints until it does belongs to no turn.
	s.sweepAtDrop(t)
	s.drop.level = s.turnLevel(t)
	t.base, t.baseOK = s.r.baseline()
	t.mark = s.r.mark()
	// The turn is published and its prompt queued at once, under mu:
	// whatever else of the turn goes to the CLI (a steer, which needs the
	// turn current; an interrupt, an answer to an approval or to a Go
	// tool, which come once begin has returned or the CLI has the prompt)
	// is queued after the prompt.
	s.mu.Lock()
	s.cur = t
	s.enqueue(lines)
	s.mu.Unlock()
	s.signal()
	if s.cfg.published != nil {
		s.cfg.published()
	}
	return nil
}

// interrupt asks the CLI to end the turn t in its protocol, once, for
// why, and returns the turn interrupt grace; with none the session is
// stopped at once. The turn's pending approvals are withdrawn and its
// tool calls cancelled.
func (s *session) interrupt(t *turn, why error, _ graces) time.Duration {
	defer func() {
		t.ctx.Cancel(why)
		s.withdraw(t)
		s.tools.cancelCalls()
	}()
	g := s.cfg.turnGrace
	if g == 0 {
		t.ignored = true
		s.halt(fmt.Errorf("%w (no turn interrupt grace) after %w", invoker.ErrInterruptIgnored, why))
		return 0
	}
	// Record the tree's parent links before the interrupt breaks them
	// (the tracking level finds the turn's orphans by them; at the cgroup
	// level it does nothing).
	s.r.snapshot()
	s.log.Debug("interrupting the turn in the CLI's protocol", "reason", why, "grace", g)
	s.cfg.tel.turnInterrupted(t.ctx, why)
	// Under protoMu, so that an approval decided meanwhile is either
	// answered before the interrupt or withdrawn after it.
	s.protoMu.Lock()
	t.interrupted = true
	s.write(safeLines(s.proto.Interrupt)...)
	s.protoMu.Unlock()
	return g
}

// escalate stops the session: the CLI let the turn interrupt grace pass.
func (s *session) escalate(_ *turn, why error) {
	s.log.Debug("the CLI ignored the interrupt; stopping the session", "grace", s.cfg.turnGrace)
	s.halt(fmt.Errorf("%w (%v) after %w", invoker.ErrInterruptIgnored, s.cfg.turnGrace, why))
}

func (s *session) verdict(t *turn) error { return s.turnVerdict(t) }

// end ends the turn t: no approval may start, its questions are withdrawn,
// and their callbacks have returned (Turn does not return before them).
func (s *session) end(t *turn) {
	s.mu.Lock()
	if s.cur == t {
		s.cur = nil
	}
	t.over = true
	s.mu.Unlock()
	t.ctx.Cancel(errTurnOver)
	s.withdraw(t)
	t.calls.Wait()
}

// skippedError describes the lines skipped during the turn t, or returns
// nil if none was.
func (s *session) skippedError(t *turn) *lineTooLongError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.skipped == 0 {
		return nil
	}
	return &lineTooLongError{n: t.skipped, longest: t.skippedMax, max: s.cfg.maxLineSize}
}

// stoppedFor reports whether the session ended because its own context
// was done the way cause says (the turn's context is often the session's):
// the error of the session's end says it already.
func (s *session) stoppedFor(cause error) bool {
	err := s.ctx.Err()
	return err != nil && errors.Is(cause, err) && errors.Is(s.err, err)
}

// errTurnOver is the cause of a turn's context once Turn returns.
var errTurnOver = errors.New("the turn is over")

// turnOutcome asks the protocol what a turn cut short by the end of the
// session established (partial text, session id).
func (s *session) turnOutcome() Outcome {
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	return s.outcome()
}

// sweepTurn kills every process the turn t added to the tree and that is
// still running: after a turn that was cancelled or timed out (why is not
// nil), whose tools the caller abandoned, or after every turn with
// Options.SweepEveryTurn. What the CLI kept running from before the turn
// (its MCP servers, helpers) is spared, and so is the CLI.
func (s *session) sweepTurn(t *turn, why error) {
	if !t.baseOK {
		return
	}
	rep := s.r.sweepSince(t.base)
	s.tel.swept(rep)
	if len(rep.Killed) > 0 || len(rep.Survivors) > 0 {
		s.log.Debug("swept the turn's processes", "reason", why, "killed", rep.Killed, "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	}
	if len(rep.Survivors) > 0 {
		s.log.Warn("processes of a turn survived its sweep", "pids", rep.Survivors)
	}
}
