package invoker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/jsonl"
)

// The errors of this package, in one place. Invoke, OpenSession and
// Session.Turn wrap them so that errors.Is finds them; messages start with
// the CLI's name ("codex: ...") and name the fix where there is one.
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
	// Images for Gemini; see Capabilities), a session asked of a CLI
	// without a long-lived mode, or containment a machine cannot give
	// (see ErrContainment). The error also matches
	// ErrInvalidRequest, and errors.ErrUnsupported of the standard
	// library, as does ErrUnsupported itself.
	ErrUnsupported error = &alsoError{msg: "not supported by this CLI", also: errors.ErrUnsupported}

	// ErrFirstEventTimeout is returned when the CLI printed no event within
	// Options.FirstEventTimeout.
	ErrFirstEventTimeout = errors.New("no event before the first-event timeout")

	// ErrIdleTimeout is returned when the CLI printed nothing for
	// Options.IdleTimeout.
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
	// message says what the CLI printed instead, and what may have
	// swallowed the terminal event: a skipped line (the error then also
	// matches ErrLineTooLong) or output cut at the wait delay
	// (Result.OutputCut).
	ErrNoResult = errors.New("CLI exited without a final result")

	// ErrLineTooLong is returned when a stdout line longer than the limit
	// set by Options.MaxLineSize was skipped. The engine cannot decode a
	// skipped line, so it cannot tell whether it held the final answer or
	// the terminal event: a run that skipped one is never a success, even
	// if the CLI reported success after it. (The Result holds what was
	// decoded.) A session that skipped one during a turn has lost a line
	// of its protocol, maybe the end of the turn: the turn fails at once
	// and the session ends (the turn's error also matches
	// ErrSessionClosed); OpenSession fails likewise for a line skipped in
	// the opening. The message gives the line's size; raise the limit
	// with Options.MaxLineSize.
	ErrLineTooLong = errors.New("stdout line over the line limit skipped")

	// ErrContainment is returned, before anything starts, when
	// Options.Containment asks for a level this machine cannot give: for
	// "cgroup", no writable cgroup v2, or one the kernel will not start
	// processes in (a host that does not run inside Options.CgroupParent).
	// The message names the level, says why (naming the cgroup) and how
	// to get it, as in "containment unavailable: cgroup: making a cgroup
	// in /sys/fs/cgroup/user.slice: …: permission denied; to get the
	// cgroup level, …". Capabilities.Containment reports the level runs
	// get, and ContainmentNote the same reason when it is not the best.
	ErrContainment = errors.New("containment unavailable")

	// ErrSandbox is returned, before anything starts, when a run asks for
	// Sandbox Mode "required" on a host that cannot hold it. The message
	// names what is missing and how to get it, as in "sandbox
	// unavailable: the kernel has no Landlock (Linux 5.13 or later, …)".
	// Capabilities.Sandbox says whether this host holds it.
	ErrSandbox = errors.New("sandbox unavailable")

	// ErrMaxTurns is matched by a *LimitError for a turn the CLI stopped
	// at Request.MaxTurns.
	ErrMaxTurns = errors.New("turn limit reached")

	// ErrMaxBudget is matched by a *LimitError for a turn the CLI stopped
	// at Request.MaxBudgetUSD: a spending cap in US dollars, which has
	// nothing to do with the host's Budget (Options.Budget), whose runs
	// wait rather than fail.
	ErrMaxBudget = errors.New("budget limit reached")

	// ErrResourceLimit is matched by a *LimitError whose Resource says
	// which resource of the host ran out: a run whose CLI the kernel
	// killed at its memory limit (Limits.Memory, or the Budget's sum held
	// by the kernel), a run (or a session's turn) that failed after the
	// kernel killed one of its processes there, or while forks were
	// refused at its process limit (Limits.Processes), whatever the CLI
	// said of the failure, and a run that could not start
	// because the host ran out of descriptors or processes (nothing
	// started; the message names the limit and how to raise it). A session
	// whose CLI was killed is closed with it. A tool killed or refused a
	// fork while the CLI lives is not an error but a KindWarning event.
	ErrResourceLimit = errors.New("resource limit reached")

	// ErrTurnInProgress is returned at once by Session.Turn when another
	// turn of the same session is running: a session runs one turn at a
	// time, and does not queue them.
	ErrTurnInProgress = errors.New("a turn is already running in this session: wait for it to return, or open another session")

	// ErrSessionClosed is returned by Session.Turn when the session has
	// ended (Close, its context, the CLI's exit, or the ladder after an
	// ignored interrupt), and by a turn that was running when it ended.
	// The error also says why the session ended.
	ErrSessionClosed = errors.New("session closed")

	// ErrInterruptIgnored is returned by a cancelled or timed-out
	// Session.Turn when the CLI did not end the turn within
	// Options.TurnInterruptGrace after it was asked to in its own
	// protocol. The CLI was then stopped with the signal ladder and the
	// session is closed: the error also matches ErrSessionClosed and what
	// stopped the turn (the context's error or the timeout), and so do
	// Session.Err and Session.Close.
	ErrInterruptIgnored = errors.New("the CLI did not end the turn within the interrupt grace after its own interrupt request; it was stopped with the signal ladder")
)

// alsoError is a sentinel that also matches a more general one.
type alsoError struct {
	msg  string
	also error
}

func (e *alsoError) Error() string { return e.msg }
func (e *alsoError) Unwrap() error { return e.also }

// An ExitError reports that the CLI exited with a non-zero status, or was
// killed by a signal it was not sent by the run's own cancellation, and no
// more specific cause was found in its output. Like os/exec's ExitError,
// it keeps the facts of the exit and a bounded tail of stderr for the
// message.
type ExitError struct {
	// ExitCode is the exit status, or -1 when the CLI was killed by a
	// signal. It is the same number as Result.ExitCode.
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
	if tail := jsonl.LastLines(e.Stderr, 3, 512); tail != "" {
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
	// Err is a sentinel such as ErrAuthRequired or ErrRateLimited when the
	// message was recognised, else nil. (The exit status is
	// Result.ExitCode.)
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

// A LimitError reports a turn stopped at a limit: one the CLI keeps and
// the Request set (Request.MaxTurns, Request.MaxBudgetUSD), a rate limit of
// the model provider that the CLI's retries did not outlast, or a limit of
// the host's resources the kernel holds (ErrResourceLimit: Resource says
// which). For the CLI's limits the conversation is intact: resume it with
// the session id to go on (after ResetsAt, for a rate limit). A CLI killed
// at its memory limit may have lost the turn in progress; the session id
// resumes what the CLI had recorded.
type LimitError struct {
	// Limit is the sentinel of the limit reached: ErrMaxTurns,
	// ErrMaxBudget, ErrRateLimited or ErrResourceLimit. errors.Is
	// matches it.
	Limit error
	// SessionID is the session to resume, if the CLI reported one.
	SessionID string
	// ResetsAt is when a rate limit resets, when the CLI said (in the
	// error, or in a KindRateLimit or retry event of the turn); zero
	// otherwise.
	ResetsAt time.Time
	// Resource, for ErrResourceLimit, is the resource: "memory" (the
	// kernel's OOM killer killed the CLI, Err then being the *ExitError of
	// its SIGKILL; or killed another process of the run, such as a tool,
	// and the run failed, Err then being how), "processes" (forks were
	// refused at Limits.Processes and the run failed; or, with nothing
	// started, the host could start no process) or "descriptors" (the
	// host ran out of file descriptors; nothing started). "" for the
	// other limits. What the kernel counted wins over what the CLI said:
	// a run that failed after such a kill or refusal is this error
	// whatever the CLI reported (a failed turn, an exit status its backend
	// explains otherwise), kept in Err.
	Resource string
	// Max is the limit that was reached: bytes for "memory", processes
	// for "processes" (Limits.Processes). 0 when the limit was not the
	// run's own: for memory, the Budget's sum held by the kernel or the
	// system's memory; for a host out of descriptors or processes, see
	// the message, which names the limits in force.
	Max int64
	// Peak is the most the run used of Resource: bytes of memory, or
	// processes at once. 0 when unknown.
	Peak int64
	// Err is what the CLI reported, usually a *StreamError, or for
	// ErrResourceLimit how the run ended (an *ExitError for a CLI killed
	// by a signal, an exit status or a failure the CLI reported, say) or
	// why nothing could start; may be nil.
	Err error
}

// Error says which limit was reached and how to go on.
func (e *LimitError) Error() string {
	what := "the turn limit (Request.MaxTurns) was reached"
	switch e.Limit {
	case ErrMaxBudget:
		what = "the budget (Request.MaxBudgetUSD) was reached"
	case ErrRateLimited:
		what = "the model provider's rate limit was reached"
		if !e.ResetsAt.IsZero() {
			what += " (it resets at " + e.ResetsAt.UTC().Format(time.RFC3339) + ")"
		}
	case ErrResourceLimit:
		what = e.resource()
	}
	if e.SessionID != "" {
		what += "; resume session " + e.SessionID + " to continue"
	}
	if e.Err != nil {
		what += ": " + e.Err.Error()
	}
	return what
}

// resource describes a limit of the host's resources.
func (e *LimitError) resource() string {
	switch e.Resource {
	case "memory":
		what := "the CLI was killed by the memory limit of " + formatBytes(e.Max)
		if e.Max == 0 {
			what = "the CLI was killed by the kernel's OOM killer under a memory limit above the run's own (the host's Budget.Memory, or the system's memory)"
		}
		if !e.cliKilled() {
			what = "the run failed after the kernel's OOM killer killed a process of it (Resources.OOMKills) at the memory limit of " + formatBytes(e.Max)
			if e.Max == 0 {
				what = "the run failed after the kernel's OOM killer killed a process of it (Resources.OOMKills) under a memory limit above the run's own (the host's Budget.Memory, or the system's memory)"
			}
		}
		if e.Peak > 0 {
			what += " (peak " + formatBytes(e.Peak) + ")"
		}
		return what
	case "processes":
		if e.Max > 0 {
			what := fmt.Sprintf("the run failed while forks were refused at its process limit of %d (Limits.Processes)", e.Max)
			if e.Peak > 0 {
				what += fmt.Sprintf(" (peak %d)", e.Peak)
			}
			return what
		}
		return "the host ran out of processes; nothing was started"
	case "descriptors":
		return "the host ran out of file descriptors; nothing was started"
	}
	return "a resource limit was reached"
}

// cliKilled reports whether a memory limit killed the CLI itself: Err is
// then nil or the *ExitError of its death by SIGKILL. Otherwise Err is
// how the run failed after another of its processes was killed.
func (e *LimitError) cliKilled() bool {
	if e.Err == nil {
		return true
	}
	ee, ok := e.Err.(*ExitError)
	return ok && ee.ExitCode < 0 && ee.Signal == "SIGKILL"
}

// formatBytes formats n bytes in binary units: "512 MiB", "511.8 MiB".
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i:i+1] + "iB"
}

// Unwrap returns the limit's sentinel and what the CLI reported.
func (e *LimitError) Unwrap() []error {
	errs := []error{e.Limit}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// A SchemaError reports a completed turn whose answer does not satisfy
// Request.OutputSchema: not JSON, or JSON of another shape. The turn itself
// succeeded; Result.Text (and Text here) keeps the answer as printed.
type SchemaError struct {
	// Text is the answer as the CLI printed it.
	Text string
	// Err says how the answer fails the schema.
	Err error
}

// Error says how the answer fails the schema.
func (e *SchemaError) Error() string {
	return "the answer does not satisfy Request.OutputSchema: " + e.Err.Error()
}

// Unwrap returns the validation error.
func (e *SchemaError) Unwrap() error { return e.Err }
