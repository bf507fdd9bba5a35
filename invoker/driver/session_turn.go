package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/internal/detach"
	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// A session's turns: Turn checks the turn as a one-turn run is checked,
// sends it in the protocol, waits for its end (interrupting it when its
// context is done or a timeout fires), sweeps what a cancelled turn left,
// and gives its verdict with decide, as a run does.

// turnState is one turn's link between the reader and Turn.
type turnState struct {
	req *invoker.TurnRequest
	// ctx is the turn's context, given to Approve and to the turn's tool
	// calls: it carries the values and deadline of the context Turn was
	// given, and is done once the turn is interrupted (for that context,
	// a timeout or Close) and when Turn returns. It is not done by the
	// caller's context directly: a callback that returns because it was
	// cancelled must find the CLI already asked to end the turn, or its
	// answer could complete the turn as if nothing was cancelled. calls
	// counts the goroutines of the turn's approvals, which Turn waits for;
	// waiting counts them too, for maxPendingApprovals (guarded by the
	// session's mu); questions are those not yet answered or withdrawn
	// (guarded by the decoder lock).
	// (A detach.Context: its Err says DeadlineExceeded once the deadline
	// has passed, although the engine, not the deadline, cancels it.)
	ctx    context.Context
	cancel context.CancelCauseFunc
	// caller is the context Turn was given: once it is done, the turn is
	// about to be interrupted for it (await does), and a decision made
	// meanwhile is left to the interrupt's withdrawal (see decide).
	caller    context.Context
	calls     sync.WaitGroup
	waiting   int
	questions map[*question]struct{}
	over      bool // Turn is returning: no approval may start (guarded by the session's mu)
	// interrupted is set, under the decoder lock, when the CLI is asked
	// to end the turn: a decision made after it is not carried out.
	interrupted bool
	first       chan struct{} // closed at the turn's first event that is not a warning
	firstOnce   sync.Once
	ended       chan struct{} // closed after the turn's last event was delivered
	out         Outcome       // set by the reader before ended is closed
	// last is set by the reader when the protocol reported the end of the
	// turn: the next KindDone event delivered is the turn's last.
	last bool
	// base is the tree's members before the turn (baseOK false when the
	// tree was already reaped): a sweep kills what the turn added.
	base   proc.Baseline
	baseOK bool
	// skipped counts the stdout lines skipped over the line limit during
	// the turn, the longest of them skippedMax bytes (guarded by the
	// session's mu).
	skipped    int
	skippedMax int64
}

// skippedLine is the run's onSkip: a line skipped during a turn, or during
// the handshake, ends the session at once with ErrLineTooLong. A one-shot
// run reads on to the CLI's exit, which comes after its last line; a
// session's protocol cannot go on in step with its CLI after losing a
// line that may have been the end of the turn (Claude Code's result holds
// the whole answer) or a request the CLI waits on: the turn would wait for
// its deadline. The turn in flight fails with the error (see await), as
// the opening does. A line skipped between turns belongs to none, and the
// session goes on.
func (s *session) skippedLine(size int64) {
	s.mu.Lock()
	s.lineTurn = s.cur // the warning that follows is the turn's
	t := s.cur
	if t != nil {
		t.skipped++
		t.skippedMax = max(t.skippedMax, size)
	}
	s.mu.Unlock()
	select {
	case <-s.ready:
		if t == nil {
			s.r.log.Warn("skipped a stdout line over the line limit between turns", "bytes", size, "limit", s.r.cfg.maxLineSize)
			return
		}
	default: // the handshake
	}
	s.halt(&lineTooLongError{n: 1, longest: size, max: s.r.cfg.maxLineSize, session: !s.oneTurn})
}

// skippedError describes the lines skipped during the turn t, or returns
// nil if none was.
func (s *session) skippedError(t *turnState) *lineTooLongError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.skipped == 0 {
		return nil
	}
	return &lineTooLongError{n: t.skipped, longest: t.skippedMax, max: s.r.cfg.maxLineSize}
}

// turn implements invoker.Session's Turn (see telemetry_calls.go). Its
// checks are those of the turn of a one-turn run, and its verdict is the
// same function's (decide).
func (s *session) turn(ctx context.Context, t invoker.TurnRequest) (*invoker.Result, error) {
	start := time.Now()
	res := &invoker.Result{ExitCode: -1, Containment: s.r.res.Containment}
	fail := func(err error) (*invoker.Result, error) {
		res.Duration = time.Since(start)
		res.SessionID = s.ID()
		return res, &cliError{CLI: s.cli, Err: err}
	}
	if !s.busy.CompareAndSwap(false, true) {
		return fail(invoker.ErrTurnInProgress)
	}
	defer s.busy.Store(false)
	if err := checkTurn(&t); err != nil {
		return fail(err)
	}
	if err := s.checkSwitch(&t); err != nil {
		return fail(err)
	}
	full := s.sreq.Request(t)
	if err := s.e.checkSupported(&full); err != nil {
		return fail(err)
	}
	if err := validateImages(t.Images); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	select {
	case <-s.done:
		return fail(s.closedError())
	default:
		if closing {
			return fail(s.closedError())
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}

	ts := &turnState{req: &t, first: make(chan struct{}), ended: make(chan struct{})}
	tc := detach.New(ctx)
	ts.ctx, ts.cancel, ts.caller = tc, tc.Cancel, ctx
	returning := false // await returned rather than re-raised a panic
	defer func() {
		// The turn's approvals are answered or withdrawn, and their
		// callbacks have returned, before Turn returns (or re-raises a
		// panic of one of them).
		s.mu.Lock()
		ts.over = true
		s.mu.Unlock()
		ts.cancel(errTurnOver)
		s.withdraw(ts)
		ts.calls.Wait()
		if returning && s.r.panicked.Load() {
			// A callback panicked after the turn's end was seen (an
			// Approve woken by the turn's end): re-raise it here, once
			// the tree it killed is gone.
			<-s.done
			s.r.reraise()
		}
	}()
	r := s.r
	// What runs now, with the CLI idle between turns, is what it keeps
	// across turns; what the turn adds is swept when it is cancelled.
	ts.base, ts.baseOK = r.baseline()
	r.decMu.Lock()
	lines, err := func() (lines [][]byte, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the session protocol failed to start a turn: %v", p)
			}
		}()
		return s.proto.StartTurn(&t)
	}()
	if err == nil {
		s.mu.Lock()
		s.cur = ts
		s.mu.Unlock()
	}
	r.decMu.Unlock()
	if err != nil {
		if !errors.Is(err, invoker.ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return fail(err)
	}
	defer func() {
		s.mu.Lock()
		if s.cur == ts {
			s.cur = nil
		}
		s.mu.Unlock()
	}()
	s.write(lines...)

	res, err = s.await(ctx, ts, res, start)
	returning = true
	return res, err
}

// await waits for the end of the turn ts, interrupting it when ctx is done
// or a timeout fires, and fills res.
func (s *session) await(ctx context.Context, ts *turnState, res *invoker.Result, start time.Time) (*invoker.Result, error) {
	r := s.r
	fail := func(err error) (*invoker.Result, error) {
		res.Duration = time.Since(start)
		res.SessionID = s.ID()
		return res, &cliError{CLI: s.cli, Err: err}
	}
	ctxDone := ctx.Done()
	timers := newTurnTimers(s.cfg, r)
	defer timers.stop()
	first := ts.first
	var grace *time.Timer
	var graceC <-chan time.Time
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	// cause is why the turn is being interrupted (the context's error or
	// a timeout), nil while it is not; ignored is set when the CLI let
	// the grace pass.
	var cause error
	ignored := false
	// gone returns once the session has ended, after its tree is reaped,
	// with the turn's partial result. err is what the CLI said about the
	// turn, if it ended it.
	gone := func(err error) (*invoker.Result, error) {
		<-s.done
		r.reraise()
		res.ExitCode = r.res.ExitCode
		res.Stderr = r.res.Stderr
		if out := s.turnOutcome(); out.Text != "" {
			res.Text = out.Text
		}
		if s.oneTurn {
			// A run of Invoke ends as a one-shot run would: with why
			// it was stopped, or the run's own verdict (an exit
			// status, a fatal condition), and nothing of a session the
			// caller never opened.
			switch {
			case cause != nil:
				return fail(cause)
			case s.err != nil:
				return fail(s.err)
			}
		}
		closed := s.closedError()
		switch {
		case ignored:
			closed = fmt.Errorf("%w (%v): %w: %w", invoker.ErrInterruptIgnored, s.cfg.turnGrace, invoker.ErrSessionClosed, cause)
		case cause != nil && !s.stoppedFor(cause):
			closed = fmt.Errorf("%w: %w", closed, cause)
		}
		if err != nil && cause == nil {
			// (A turn that was being stopped ended as it was asked to:
			// its end says nothing new.)
			closed = fmt.Errorf("%w; the turn ended with: %w", closed, err)
		}
		return fail(closed)
	}
	ended := func() (*invoker.Result, error) {
		if r.panicked.Load() {
			// A callback of the caller's (Approve, a tool handler)
			// panicked during the turn: the tree is being killed, and
			// the panic is re-raised once it is gone.
			return gone(nil)
		}
		if s.skippedError(ts) != nil {
			// A line of the turn was skipped: the session is being
			// stopped for it (skippedLine), whatever the CLI said after.
			return gone(nil)
		}
		out := ts.out
		if !out.Success && r.ctx.Err() != nil {
			// The CLI ended the turn because the session is being
			// stopped (Close, the session's context, the ladder after
			// an ignored interrupt): say so, once the tree is gone.
			return gone(out.Err)
		}
		res.ExitCode = 0
		res.SessionID, res.Text, res.Usage, res.Turns = out.SessionID, out.Text, out.Usage, out.Turns
		if res.SessionID == "" {
			res.SessionID = s.ID()
		}
		if (cause != nil && !s.cfg.keepCancelled) || s.cfg.sweepTurns {
			s.sweepTurn(ts, cause)
		}
		res.Stderr = r.tail.String()
		res.Duration = time.Since(start)
		err, done := decide(&out, cause, s.skippedError(ts), s.schema, res)
		if !done {
			// The CLI ended the turn neither with success nor with a
			// failure of its own.
			err = &noResultError{printed: "the CLI ended the turn without its terminal success event", stderr: jsonl.LastLines(res.Stderr, 3, 512)}
		}
		if err != nil {
			return res, &cliError{CLI: s.cli, Err: err}
		}
		return res, nil
	}
	// interrupt asks the CLI to end the turn, once, for why.
	interrupt := func(why error) {
		if cause != nil {
			return
		}
		cause = why
		timers.stop()
		// Once the CLI is asked to end the turn, the turn's pending
		// approvals are withdrawn and its tool calls cancelled.
		defer func() {
			ts.cancel(why)
			s.withdraw(ts)
			s.tools.cancelCalls()
		}()
		g := s.cfg.turnGrace
		if g == 0 {
			ignored = true
			s.halt(fmt.Errorf("%w (no turn interrupt grace) after %w", invoker.ErrInterruptIgnored, why))
			return
		}
		// Record the tree's parent links before the interrupt breaks
		// them (the tracking level finds the turn's orphans by them; at
		// the cgroup level it does nothing).
		r.snapshot()
		r.log.Debug("interrupting the turn in the CLI's protocol", "reason", why, "grace", g)
		s.cfg.tel.turnInterrupted(ctx, why)
		// Under the decoder lock, so that an approval decided meanwhile
		// is either answered before the interrupt or withdrawn after it.
		r.decMu.Lock()
		ts.interrupted = true
		s.write(func() (lines [][]byte) {
			defer func() { recover() }()
			return s.proto.Interrupt()
		}()...)
		r.decMu.Unlock()
		grace = time.NewTimer(g)
		graceC = grace.C
	}
	for {
		select {
		case <-ts.ended:
			return ended()

		case <-s.done:
			select {
			case <-ts.ended:
				return ended() // the turn was complete before the CLI exited
			default:
			}
			return gone(nil)

		case <-ctxDone:
			ctxDone = nil
			interrupt(ctxError(ctx))

		case <-first:
			first = nil
			timers.firstEvent()

		case <-timers.firstC:
			if err := timers.firstDue(ts.first); err != nil {
				interrupt(err)
			}

		case <-timers.idleC:
			if err := timers.idleDue(); err != nil {
				interrupt(err)
			}

		case <-graceC:
			graceC = nil
			ignored = true
			r.log.Debug("the CLI ignored the interrupt; stopping the session", "grace", s.cfg.turnGrace)
			s.halt(fmt.Errorf("%w (%v) after %w", invoker.ErrInterruptIgnored, s.cfg.turnGrace, cause))
		}
	}
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
func (s *session) turnOutcome() (out Outcome) {
	s.r.decMu.Lock()
	defer s.r.decMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{}
		}
	}()
	return s.proto.Outcome(s.r.tail.String())
}

// sweepTurn kills every process the turn ts added to the tree and that is
// still running: after a turn that was cancelled or timed out (why is not
// nil), whose tools the caller abandoned, or after every turn with
// Options.SweepEveryTurn. What the CLI kept running from before the turn
// (its MCP servers, helpers) is spared, and so is the CLI.
func (s *session) sweepTurn(ts *turnState, why error) {
	if !ts.baseOK {
		return
	}
	r := s.r
	rep := r.sweepSince(ts.base)
	r.tel.swept(rep)
	if len(rep.Killed) > 0 || len(rep.Survivors) > 0 {
		r.log.Debug("swept the turn's processes", "reason", why, "killed", rep.Killed, "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	}
	if len(rep.Survivors) > 0 {
		r.log.Warn("processes of a turn survived its sweep", "pids", rep.Survivors)
	}
}
