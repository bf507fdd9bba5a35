package driver

import (
	"encoding/json"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// A Backend adapts one CLI to the shared engine: it builds the command line
// for a Request and decodes the CLI's output. It holds no process code.
// Backend packages implement it and pass it to New; users of the library
// never need it, as users of database/sql never need database/sql/driver.
//
// A Backend must be safe for concurrent use. Per-run state belongs in the
// Decoder it returns.
type Backend interface {
	// Name returns the CLI's short name, such as "codex".
	Name() string

	// Binary returns the executable name looked up on PATH by default.
	Binary() string

	// InstallHint returns the command that installs the CLI, for the
	// ErrNotInstalled message, such as "npm install -g @openai/codex".
	InstallHint() string

	// Capabilities declares which optional Request fields the CLI
	// honours, and what a session may switch between turns. The engine
	// refuses a request that sets any other field before it calls
	// Command, and Invoker.Capabilities reports it with the rest added:
	// Sessions and Steer, which the backend declares by being a
	// SessionBackend and a Steerer, and the containment level. Those
	// fields of the value a Backend returns are ignored.
	Capabilities() invoker.Capabilities

	// Hint says what to do instead of setting field (a Request field's Go
	// name, or "Sessions") when the CLI does not support it, for the
	// ErrUnsupported error; "" for no advice.
	Hint(field string) string

	// Command returns the arguments, environment and standard input for
	// req. The engine has already checked the fields it knows (prompt,
	// workdir, permission, capabilities). req.Sandbox is the sandbox the
	// engine decided for the run, with Options.Sandbox merged in: Mode
	// "required" and the rules in force where the kernel holds the run,
	// Mode "off" where it does not (the same in the SessionRequest that
	// SessionCommand and NewSessionProtocol see). An error should wrap
	// ErrInvalidRequest (see also Unsupported).
	Command(req *invoker.Request) (*Command, error)

	// NewDecoder returns a Decoder for one run of req.
	NewDecoder(req *invoker.Request) Decoder
}

// A Command is how a backend wants its CLI started.
type Command struct {
	// Args are the arguments after the executable's name.
	Args []string
	// Env holds KEY=VALUE pairs the backend adds. Request.Env overrides
	// them.
	Env []string
	// Unset names variables removed from the inherited environment, such
	// as CLAUDECODE.
	Unset []string
	// Stdin is written to the CLI's standard input, which is then closed.
	// Empty means the CLI gets an empty, closed standard input.
	Stdin string
	// RunsPastEOF, for a session's command, says that the CLI may go on
	// running after the end of its input (an adapter that serves until it
	// is stopped): Session.Close then waits at most a second for it to
	// exit before the signal ladder, and reports no error for the stop.
	RunsPastEOF bool
	// Cleanup, if not nil, is called once when the run is over: after the
	// process tree is gone, or when the run does not start after Command
	// returned (the binary is missing, ctx is already done). A backend
	// removes with it the files it wrote for the run, such as Codex's
	// output-schema file. A Command that returns an error must clean up
	// itself.
	Cleanup func()
}

// A Decoder turns the lines of one run's output into events and keeps what
// the run established: session id, answer, usage, and whether the CLI's
// terminal event reported success. The engine calls its methods from one
// goroutine at a time. A Decoder must never panic on any input; the engine
// turns a panic into a Warning event all the same.
type Decoder interface {
	// Decode turns one stdout line (without its newline) into zero or more
	// events. The decoder owns line: events may keep it as Raw without
	// copying, and the engine never reuses it. A line that carries nothing
	// may give no event; a line that cannot be decoded should give a
	// KindWarning. The engine sets SessionID on the events that leave it
	// empty, once an event reported one. A non-nil error is fatal: the
	// engine stops the run and returns it (use it for stall signatures
	// such as a CLI waiting on stdin, or an authentication failure that
	// would otherwise hang).
	Decode(line []byte) ([]invoker.Event, error)

	// Stderr inspects one line of standard error. A non-nil error is fatal
	// in the same way as for Decode; nil lets the run go on.
	Stderr(line []byte) error

	// Outcome reports what the stream established. The engine calls it
	// after the process tree is gone, with the CLI's exit status (-1 when
	// killed by a signal) and the stderr tail.
	Outcome(exitCode int, stderr string) Outcome
}

// An Outcome is what a decoder concluded about a run.
type Outcome struct {
	// SessionID is the session or thread id, if one was seen.
	SessionID string
	// Text is the final answer, or the partial text seen so far.
	Text string
	// Usage is the run's token usage.
	Usage invoker.Usage
	// Success is true when the CLI's terminal success event was seen.
	Success bool
	// Err is the failure the CLI reported (usually a *StreamError, a
	// *LimitError for a limit the Request set), or an explained
	// *ExitError; nil when Success or when nothing is known.
	Err error

	// Structured is the structured answer the CLI reported apart from its
	// text (Claude Code's structured_output), if any. When the Request set
	// OutputSchema and Structured is empty, the engine takes Text as the
	// answer (Codex prints the JSON as its message), and checks either
	// against the schema.
	Structured json.RawMessage
	// Turns is the number of turns the CLI reported, or 0.
	Turns int
	// ResetsAt is when the rate limit that failed the turn resets, if
	// the CLI said. When Err matches ErrRateLimited, the engine reports it
	// as a *LimitError carrying ResetsAt.
	ResetsAt time.Time
}

// Unsupported returns the error a Backend's Command returns for a Request
// field its CLI cannot honour. It matches ErrUnsupported (and so
// errors.ErrUnsupported) and ErrInvalidRequest; hint says what to do instead.
func Unsupported(field, hint string) error {
	return &unsupportedError{field: field, hint: hint}
}
