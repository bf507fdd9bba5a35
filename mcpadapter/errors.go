package mcpadapter

import (
	"context"
	"errors"
	"fmt"
)

// A Status says how a run ended: the status field of [Output] and of a
// [TranscriptEntry].
type Status string

// The values of Status.
const (
	// StatusCompleted is a run that ended with the CLI's terminal success
	// event.
	StatusCompleted Status = "completed"
	// StatusFailed is a run that failed: the CLI reported an error, exited
	// non-zero, timed out, or could not start.
	StatusFailed Status = "failed"
	// StatusCancelled is a run stopped, or a call abandoned before its run
	// started, because the client cancelled it, its connection ended, the
	// server shut down, or a sibling task of a fail_fast call failed.
	StatusCancelled Status = "cancelled"
	// StatusRefused is a call refused before anything started: bad input,
	// a workdir outside the roots, a permission above the limit, or a
	// server shutting down.
	StatusRefused Status = "refused"
	// StatusRunning appears only in the transcript: the line written when
	// a run's session id becomes known, before the run ends, so that a run
	// cut off with its server (SIGKILL) can still be resumed. The run's
	// final line follows with the same Run id.
	StatusRunning Status = "running"
)

// ErrShuttingDown is the cancellation cause (context.Cause) of the runs
// stopped by [Tools.Shutdown], and the reason of the calls refused
// afterwards. It matches context.Canceled, so a run's error reads
// as a cancellation whether the invoker returns ctx.Err() or
// context.Cause(ctx).
var ErrShuttingDown error = &cancelCause{"the server is shutting down"}

// ErrClientGone is the cancellation cause of a call served over HTTP
// whose request ended before the call was answered: the client
// disconnected, or its session was deleted or timed out (see
// [Tools.Handler]). It matches context.Canceled.
var ErrClientGone error = &cancelCause{"the client went away before the answer (its HTTP request ended)"}

// A cancelCause is a cancellation cause that says who cancelled, and
// matches context.Canceled.
type cancelCause struct{ msg string }

func (e *cancelCause) Error() string      { return e.msg }
func (*cancelCause) Is(target error) bool { return target == context.Canceled }

// errRefused is matched (errors.Is) by every error that refuses a call
// before anything starts; see refusal.
var errRefused = errors.New("refused")

// A refusal refuses a call before anything starts: a bad workdir, a
// permission above the ceiling, too many tasks, a server shutting down.
// Its reason is what the caller reads in Output.Error.
type refusal struct {
	reason string
	cause  error // optional: ErrShuttingDown, invoker.ErrInvalidRequest
}

func (e *refusal) Error() string { return "refused: " + e.reason }

// Unwrap makes a refusal match errRefused and its cause.
func (e *refusal) Unwrap() []error {
	if e.cause == nil {
		return []error{errRefused}
	}
	return []error{errRefused, e.cause}
}

func refusef(format string, args ...any) error {
	return &refusal{reason: fmt.Sprintf(format, args...)}
}

// errShutdownRefusal refuses the calls that arrive once Tools.Shutdown is
// called. Runs in flight at that moment are cancelled instead, with
// ErrShuttingDown as the cause.
var errShutdownRefusal error = &refusal{reason: ErrShuttingDown.Error(), cause: ErrShuttingDown}

// reasonOf returns what a caller reads of err in Output.Error: a refusal's
// reason, or else the error's text.
func reasonOf(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return err.Error()
}

// siblingFailed is the cancellation cause of the tasks of a fail_fast
// parallel call after one of them failed.
type siblingFailed struct {
	index  int
	status Status
}

func (e *siblingFailed) Error() string {
	return fmt.Sprintf("task %d %s and fail_fast is set", e.index, e.status)
}

// Is makes the cause match context.Canceled, like ErrShuttingDown.
func (e *siblingFailed) Is(target error) bool { return target == context.Canceled }
