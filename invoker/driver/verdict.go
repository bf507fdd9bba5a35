package driver

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/google/jsonschema-go/jsonschema"
)

// The verdict: what the CLI reported, why it was stopped and what was lost
// on the way, made into the error of a run or a turn.

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

// verdict decides the run's error from what the decoder established, why
// the run was stopped, how the CLI ended and what was lost on the way.
// Success needs the CLI's terminal success event and nothing skipped.
func (r *run) verdict(out Outcome, stopErr error, st proc.State, werr error) error {
	skipped := r.skippedError()
	var ee *invoker.ExitError
	if errors.As(out.Err, &ee) && ee.ExitCode < 0 && ee.Signal == "" {
		ee.Signal = st.Signal // the decoder cannot know it
	}
	if err, done := decide(&out, stopErr, skipped, r.schema, r.res); done {
		return err
	}
	switch {
	case werr != nil:
		return fmt.Errorf("reaping the CLI: %w", werr)
	case st.Code != 0:
		return &invoker.ExitError{ExitCode: st.Code, Signal: st.Signal, Stderr: r.res.Stderr}
	}
	// Exit status 0 without the terminal event: say what the CLI printed
	// instead, and what may have swallowed the event.
	e := &noResultError{printed: r.printed(), stderr: jsonl.LastLines(r.res.Stderr, 3, 512)}
	if skipped != nil {
		e.lost = append(e.lost, skipped)
	}
	if r.waitDelayed {
		e.lost = append(e.lost, fmt.Errorf("output streams closed at the wait delay (%v) while a process outside the run held them open: the terminal event may have come after (Result.OutputCut)", r.cfg.waitDelay))
	}
	return e
}

// printed describes what the CLI printed on stdout, for a run that ended
// without its terminal event.
func (r *run) printed() string {
	switch {
	case r.junk != nil:
		return fmt.Sprintf("stdout held text that is not an event, starting %s (is the binary the CLI, in a version that prints JSON events?)", quoteStart(r.junk))
	case r.lines == 0 && r.skipped == 0:
		return "the CLI printed nothing on stdout"
	default:
		return fmt.Sprintf("none of the %d lines the CLI printed on stdout was its terminal event", r.lines+r.skipped)
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
	if r.skipped == 0 || r.onSkip != nil {
		// A driver that learns of skipped lines (a session) reports them
		// with the turn they belong to.
		return nil
	}
	return &lineTooLongError{n: r.skipped, longest: r.skippedMax, max: r.cfg.maxLineSize}
}
