package invoker

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors returned by Invoke, wrapped so that errors.Is finds them.
// Messages name the CLI and, where there is one, the fix.
var (
	// ErrNotInstalled is returned when the CLI's binary cannot be found.
	// The error also matches exec.ErrNotFound when the binary was looked
	// up on PATH, and its message names the npm package to install.
	ErrNotInstalled = errors.New("CLI not installed")

	// ErrInvalidRequest is returned, before any process starts, for a
	// Request that cannot be run: an empty prompt, a relative or missing
	// workdir, an unknown permission.
	ErrInvalidRequest = errors.New("invalid request")

	// ErrUnsupported is returned, before any process starts, when a
	// Request sets a field the backend's CLI cannot honour (for example
	// Images for Gemini; see Capabilities). The error also matches
	// ErrInvalidRequest, and errors.ErrUnsupported of the standard
	// library, as does ErrUnsupported itself.
	ErrUnsupported error = &alsoError{msg: "not supported by this CLI", also: errors.ErrUnsupported}

	// ErrFirstEventTimeout is returned when the CLI printed no event within
	// the time set by WithFirstEventTimeout.
	ErrFirstEventTimeout = errors.New("no event before the first-event timeout")

	// ErrIdleTimeout is returned when the CLI printed nothing for the time
	// set by WithIdleTimeout.
	ErrIdleTimeout = errors.New("no output before the idle timeout")

	// ErrAuthRequired is returned when the CLI reports that it is not
	// logged in or its credentials were rejected.
	ErrAuthRequired = errors.New("authentication required")

	// ErrRateLimited is returned when the CLI reports that the model API
	// refused the request for rate or quota limits.
	ErrRateLimited = errors.New("rate limited")

	// ErrNoResult is returned when the CLI exited with status 0 but without
	// the terminal event that reports success: several CLIs exit 0 when
	// interrupted or on some errors, and a program that is not the CLI
	// (a wrapper script, the wrong binary) prints no events at all. The
	// message says what the CLI printed instead; the error also matches
	// ErrLineTooLong or ErrWaitDelay when the terminal event may have been
	// lost that way.
	ErrNoResult = errors.New("CLI exited without a final result")

	// ErrLineTooLong is returned when a stdout line longer than the limit
	// set by WithMaxLineSize was skipped. The engine cannot decode a
	// skipped line, so it cannot tell whether it held the final answer or
	// the terminal event: a run that skipped one is never a success, even
	// if the CLI reported success after it. (The Result holds what was
	// decoded.) The message gives the line's size; raise the limit with
	// WithMaxLineSize.
	ErrLineTooLong = errors.New("stdout line over the line limit skipped")

	// ErrWaitDelay is matched by ErrNoResult's error when the CLI's output
	// streams were held open by a process outside the run's tree and were
	// closed at the wait delay (see WithWaitDelay), so the stream may be
	// truncated, like os/exec's ErrWaitDelay. After the CLI's terminal
	// success event the turn is complete: Invoke returns no error, and
	// Result.OutputCut reports the cut.
	ErrWaitDelay = errors.New("output streams closed at the wait delay")
)

// alsoError is a sentinel that also matches a more general one.
type alsoError struct {
	msg  string
	also error
}

func (e *alsoError) Error() string { return e.msg }
func (e *alsoError) Unwrap() error { return e.also }

// An Error wraps any error returned by Invoke with the name of the CLI, so
// that messages read "codex: ...". errors.Is and errors.As see through it.
type Error struct {
	// CLI is the short name of the CLI: "codex", "gemini", "claude".
	CLI string
	// Err is what went wrong.
	Err error
}

// Error returns the message, prefixed with the CLI's name.
func (e *Error) Error() string { return e.CLI + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// An ExitError reports that the CLI exited with a non-zero status, or was
// killed by a signal it was not sent by the run's own cancellation, and no
// more specific cause was found in its output. Like os/exec's ExitError,
// it keeps the facts of the exit and a bounded tail of stderr for the
// message.
type ExitError struct {
	// ExitCode is the exit status, or -1 when the CLI was killed by a
	// signal. It is the same number as Result.ExitCode and
	// StreamError.ExitCode.
	ExitCode int
	// Signal names the signal that killed the CLI, such as "SIGKILL" (an
	// OOM kill, say), when ExitCode is -1; "" otherwise. An exit status
	// such as 143 (128+SIGTERM) is an exit, not a death by signal: the
	// CLI caught the signal and exited.
	Signal string
	// Stderr is the tail of the CLI's standard error.
	Stderr string
	// Explanation says what the exit code means for this CLI, when known
	// (for example Gemini's HTTP status modulo 256).
	Explanation string
	// Err is a sentinel such as ErrAuthRequired or ErrRateLimited when the
	// exit code identifies one, else nil.
	Err error
}

// Unwrap returns the sentinel the exit code identifies, if any.
func (e *ExitError) Unwrap() error { return e.Err }

// Error describes the exit status, its meaning and the last stderr lines.
func (e *ExitError) Error() string {
	var b strings.Builder
	switch {
	case e.ExitCode >= 0:
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	case e.Signal != "":
		b.WriteString("killed by signal " + e.Signal)
	default:
		b.WriteString("killed by a signal")
	}
	if e.Explanation != "" {
		b.WriteString(" (" + e.Explanation + ")")
	}
	if tail := lastLines(e.Stderr, 3, 512); tail != "" {
		b.WriteString(": " + tail)
	}
	return b.String()
}

// A StreamError reports a failure the CLI stated in its own output stream:
// Claude's result with is_error, Codex's turn.failed, Gemini's result with
// status "error".
type StreamError struct {
	// Message is the CLI's error message.
	Message string
	// Type is the CLI's error type or subtype, if it gave one
	// (for example "error_max_turns").
	Type string
	// ExitCode is the CLI's exit status, or -1 when it was killed by a
	// signal, as in Result.ExitCode.
	ExitCode int
	// Err is a sentinel such as ErrAuthRequired or ErrRateLimited when the
	// message was recognised, else nil.
	Err error
}

// Error returns the CLI's message with its error type.
func (e *StreamError) Error() string {
	msg := "the CLI reported a failure"
	if e.Type != "" {
		msg += " (" + e.Type + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the recognised sentinel, if any.
func (e *StreamError) Unwrap() error { return e.Err }

// lastLines returns at most n trailing non-empty lines of s, joined by
// " | " and cut to max bytes.
func lastLines(s string, n, max int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var kept []string
	for i := len(lines) - 1; i >= 0 && len(kept) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			kept = append(kept, l)
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	out := strings.Join(kept, " | ")
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return out
}
