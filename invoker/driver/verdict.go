package driver

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/google/jsonschema-go/jsonschema"
)

// The verdict: what the CLI reported, why it was stopped and what was lost
// on the way, made into the error of a run or a turn.

// decide is the part of a turn's verdict that every turn shares, one-shot
// or a session's, so that the same output of the CLI gives the same
// outcome through Invoke and through Session.Turn. It weighs what the CLI reported about the turn
// (out), why the turn was stopped (stopErr, nil when it was not), the
// stdout lines skipped during it, and the schema its answer must satisfy;
// it fills res.Structured. Success needs the CLI's terminal success event
// and nothing skipped. done is false when none of that decides (the CLI
// neither ended the turn in its own terms nor was stopped), and the caller
// says what it knows instead: the exit status of a one-shot run, no result
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

// verdict decides a run's error once it is over: what the decoder
// established (out), why the run was stopped, how the CLI ended and what
// was lost on the way (skipped, nil for a conversation that reports its
// skipped lines itself). It fills res.Structured against schema. Success
// needs the CLI's terminal success event and nothing skipped.
func (r *run) verdict(out *Outcome, skipped *lineTooLongError, schema *jsonschema.Resolved, res *invoker.Result) error {
	end := &r.exit
	var ee *invoker.ExitError
	if errors.As(out.Err, &ee) && ee.ExitCode < 0 && ee.Signal == "" {
		ee.Signal = end.state.Signal // the decoder cannot know it
	}
	id := res.SessionID
	if id == "" {
		id = out.SessionID
	}
	err, done := decide(out, end.stopErr, skipped, schema, res)
	if out.Success || end.stopErr != nil {
		return err
	}
	// The run failed on its own: the kernel's evidence wins over what the
	// CLI said. The kernel killed the CLI at a memory limit: whatever it
	// said before, that is what ended the run.
	if lim := r.killedByLimit(id); lim != nil {
		return lim
	}
	if done {
		return limitEvidence(err, end.usage, id)
	}
	switch {
	case end.reapErr != nil:
		return fmt.Errorf("reaping the CLI: %w", end.reapErr)
	case end.state.Code != 0:
		return limitEvidence(&invoker.ExitError{ExitCode: end.state.Code, Signal: end.state.Signal, Stderr: end.stderr}, end.usage, id)
	}
	// Exit status 0 without the terminal event: say what the CLI printed
	// instead, and what may have swallowed the event.
	e := &noResultError{printed: r.printed(), stderr: jsonl.LastLines(end.stderr, 3, 512)}
	if skipped != nil {
		e.lost = append(e.lost, skipped)
	}
	if end.cut {
		e.lost = append(e.lost, fmt.Errorf("output streams closed at the wait delay (%v) while a process outside the run held them open: the terminal event may have come after (Result.OutputCut)", r.cfg.waitDelay))
	}
	return limitEvidence(e, end.usage, id)
}

// printed describes what the CLI printed on stdout, for a run that ended
// without its terminal event.
func (r *run) printed() string {
	switch {
	case r.stats.junk != nil:
		return fmt.Sprintf("stdout held text that is not an event, starting %s (is the binary the CLI, in a version that prints JSON events?)", quoteStart(r.stats.junk))
	case r.stats.lines == 0 && r.stats.skipped == 0:
		return "the CLI printed nothing on stdout"
	default:
		return fmt.Sprintf("none of the %d lines the CLI printed on stdout was its terminal event", r.stats.lines+r.stats.skipped)
	}
}

// quoteStart quotes b, marking it as cut when it is as long as the part
// of a line that is kept.
func quoteStart(b []byte) string {
	q := strconv.Quote(string(b))
	if len(b) >= junkMax {
		q += "..."
	}
	return q
}

// skippedError describes the stdout lines skipped over the line limit, or
// returns nil if none was. It matches ErrLineTooLong.
func (r *run) skippedError() *lineTooLongError {
	if r.stats.skipped == 0 {
		return nil
	}
	return &lineTooLongError{n: r.stats.skipped, longest: r.stats.skippedMax, max: r.cfg.maxLineSize}
}

// turnVerdict fills the result of the session's turn t and returns its
// error, once the turn has ended or the session has (t.gone). A turn that
// ended while the session is being stopped (a panic of the caller's, a
// skipped line, Close, the session's context, the ladder after an ignored
// interrupt) is judged once the session is gone, by sessionGone.
func (s *session) turnVerdict(t *turn) error {
	if t.gone || s.cb.failed() || s.skippedError(t) != nil {
		return s.sessionGone(t, nil)
	}
	out := t.out
	if !out.Success && s.r.stopping() {
		return s.sessionGone(t, out.Err)
	}
	res := t.res
	res.ExitCode = 0
	res.SessionID, res.Text, res.Usage, res.Turns = out.SessionID, out.Text, out.Usage, out.Turns
	usage := s.r.since(t.mark)
	res.Resources = resources(usage)
	if res.SessionID == "" {
		res.SessionID = s.ID()
	}
	if (t.cause != nil && !s.cfg.keepCancelled) || s.cfg.sweepTurns {
		s.sweepTurn(t, t.cause)
	}
	res.Stderr = s.r.stderrTail()
	err, done := decide(&out, t.cause, s.skippedError(t), t.schema, res)
	if !done {
		// The CLI ended the turn neither with success nor with a failure
		// of its own.
		err = &noResultError{printed: "the CLI ended the turn without its terminal success event", stderr: jsonl.LastLines(res.Stderr, 3, 512)}
	}
	if out.Success || t.cause != nil {
		return err
	}
	// The turn failed on its own: what the kernel counted during it wins
	// over what the CLI said, as for a run.
	return limitEvidence(err, usage, res.SessionID)
}

// sessionGone waits for the end of the session whose turn t it cut short,
// and returns the turn's error with its partial result; said is what the
// CLI said about the turn, if it ended it. A run of Invoke (oneTurn) ends
// as a one-shot run would: with why it was stopped, or the run's own
// verdict, and nothing of a session the caller never opened.
func (s *session) sessionGone(t *turn, said error) error {
	<-s.r.over()
	end, res := s.r.end(), t.res
	res.ExitCode, res.Stderr, res.SessionID = end.state.Code, end.stderr, s.ID()
	res.Resources = resources(s.r.since(t.mark))
	if out := s.turnOutcome(); out.Text != "" {
		res.Text = out.Text
	}
	if s.cb.failed() {
		return nil // run re-raises the panic
	}
	if s.oneTurn {
		switch {
		case t.cause != nil:
			return t.cause
		case s.err != nil:
			return s.err
		}
	}
	closed := s.closedError()
	switch {
	case t.ignored:
		closed = fmt.Errorf("%w (%v): %w: %w", invoker.ErrInterruptIgnored, s.cfg.turnGrace, invoker.ErrSessionClosed, t.cause)
	case t.cause != nil && !s.stoppedFor(t.cause):
		closed = fmt.Errorf("%w: %w", closed, t.cause)
	}
	if said != nil && t.cause == nil {
		// (A turn that was being stopped ended as it was asked to: its end
		// says nothing new.)
		closed = fmt.Errorf("%w; the turn ended with: %w", closed, said)
	}
	return closed
}
