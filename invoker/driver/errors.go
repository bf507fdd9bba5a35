package driver

import (
	"context"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
)

// cliError names the CLI in the message of every error an Invoker or a
// Session returns ("codex: ..."); errors.Is and errors.As see through it.
type cliError struct {
	CLI string
	Err error
}

func (e *cliError) Error() string { return e.CLI + ": " + e.Err.Error() }

func (e *cliError) Unwrap() error { return e.Err }

// lineTooLongError is ErrLineTooLong with the size of what was skipped.
type lineTooLongError struct {
	n       int   // lines skipped
	longest int64 // bytes in the longest of them
	max     int   // the line limit
	success bool  // the CLI reported success after them
	session bool  // it ended the session the line was skipped in
}

func (e *lineTooLongError) Error() string {
	msg := fmt.Sprintf("a stdout line of %d bytes was skipped, over the line limit of %d bytes; it", e.longest, e.max)
	if e.n > 1 {
		msg = fmt.Sprintf("%d stdout lines were skipped, over the line limit of %d bytes (the longest %d bytes); they", e.n, e.max, e.longest)
	}
	msg += " may have held the final answer or the terminal event: raise the limit with Options.MaxLineSize"
	if e.success {
		msg = "the CLI reported success, but " + msg
	}
	if e.session {
		msg += "; the session was ended, as its protocol may have lost the end of the turn or a request the CLI waits on (resume the conversation in a new session with its id)"
	}
	return msg
}

func (e *lineTooLongError) Is(target error) bool { return target == invoker.ErrLineTooLong }

// noResultError is ErrNoResult with what the CLI printed instead and what
// may have swallowed the terminal event.
type noResultError struct {
	printed string  // what stdout held
	stderr  string  // the last lines of stderr, or ""
	lost    []error // the skipped lines (ErrLineTooLong), the cut at the wait delay
}

func (e *noResultError) Error() string {
	msg := invoker.ErrNoResult.Error() + ": " + e.printed
	for _, l := range e.lost {
		msg += "; " + l.Error()
	}
	if e.stderr != "" {
		msg += "; stderr: " + e.stderr
	}
	return msg
}

func (e *noResultError) Unwrap() []error { return append([]error{invoker.ErrNoResult}, e.lost...) }

// ctxError returns the error of a run that ctx stopped, or kept from
// starting: ctx.Err(), which callers match with errors.Is. A cause given
// with context.WithCancelCause (or WithDeadlineCause, WithTimeoutCause) is
// named in the message but not wrapped: it is why the caller stopped the
// run, not something the run did, so errors.Is and errors.As must not find
// it. Otherwise an errgroup sibling stopped because another run failed
// would match that run's *ExitError, and a run cancelled with the cause
// ErrRateLimited would look rate limited. context.Cause(ctx) returns it.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return &ctxStopError{err: err, cause: cause.Error()}
	}
	return err
}

// ctxStopError is ctx.Err() with the text of the cancellation's cause.
type ctxStopError struct {
	err   error // context.Canceled or context.DeadlineExceeded
	cause string
}

func (e *ctxStopError) Error() string { return e.err.Error() + " (cause: " + e.cause + ")" }

// Unwrap returns ctx.Err() only: the cause is text, never a match.
func (e *ctxStopError) Unwrap() error { return e.err }

type unsupportedError struct {
	field, hint string
	turn        bool   // field is a TurnRequest's
	method      bool   // field is a Session method
	what        string // the part of field that is not supported, if not all of it
}

func (e *unsupportedError) Error() string {
	msg := fmt.Sprintf("Request.%s is not supported by this CLI", e.field)
	switch {
	case e.what != "":
		msg = fmt.Sprintf("Request.%s with %s is not supported by this CLI", e.field, e.what)
	case e.turn:
		msg = fmt.Sprintf("TurnRequest.%s (a switch between turns) is not supported by this CLI", e.field)
	case e.method:
		msg = fmt.Sprintf("Session.%s is not supported by this CLI", e.field)
	}
	if e.hint != "" {
		msg += ": " + e.hint
	}
	return msg
}

func (e *unsupportedError) Is(target error) bool {
	return target == invoker.ErrUnsupported || target == invoker.ErrInvalidRequest
}

// Unwrap returns ErrUnsupported, through which errors.ErrUnsupported
// matches too.
func (e *unsupportedError) Unwrap() error { return invoker.ErrUnsupported }
