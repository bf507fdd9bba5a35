package invoker

import "context"

// A Session is one warm CLI process holding a conversation, opened with
// Invoker.OpenSession. Its turns skip the CLI's start-up and are
// interrupted in the CLI's own protocol. They run one at a time; a Turn
// while another is running fails at once with ErrTurnInProgress. Close,
// ID, Done and Err may be called at any time, from any goroutine.
//
// The session's processes are held exactly as a run's: when Close
// returns, when the context given to OpenSession is done, when the host
// exits or crashes, the CLI and every process it started are gone.
//
// A run of Invoke is a session of one turn: for the same output of the
// CLI, Turn gives the same Result and the same error as Invoke (a turn
// that ends with its session also matches ErrSessionClosed, which a run
// of Invoke, opening no session, never does).
type Session interface {
	// Turn sends t's prompt and returns when the turn has ended, with the
	// same Result and events as Invoke gives for one run. The session
	// stays open after a turn that failed in the CLI's own terms (a model
	// error, an interrupted turn).
	//
	// When ctx is cancelled or its deadline passes, or a first-event or
	// idle timeout (Options) fires, Turn asks the CLI to end the turn in
	// its own protocol (Claude Code's interrupt request, Codex's
	// turn/interrupt, ACP's session/cancel) and waits
	// Options.TurnInterruptGrace for the turn to end. The CLI then records
	// the interrupted turn, the session stays usable, and the error
	// matches ctx.Err() (or the timeout's sentinel). A CLI that does not
	// end the turn in time is stopped with the signal ladder and the
	// session is closed: the error then also matches ErrInterruptIgnored
	// and ErrSessionClosed, and Err and Close report the same.
	//
	// A stdout line over Options.MaxLineSize during the turn fails it at
	// once with ErrLineTooLong, and ends the session (the error also
	// matches ErrSessionClosed, and so do Err and Close): the session's
	// protocol lost a line that may have been the end of the turn, or a
	// request the CLI waits on for an answer. Resume the conversation in
	// a new session with ID.
	//
	// Result.ExitCode is 0 for a turn that ended while the CLI runs on,
	// else the CLI's exit status (-1 when killed by a signal).
	// Result.Stderr is the tail of the session's standard error;
	// Result.Duration is the turn's.
	Turn(ctx context.Context, t TurnRequest) (*Result, error)
	// Steer adds prompt to the turn in progress: the CLI gives it to the
	// model with the turn's next request, and the turn goes on (Codex's
	// turn/steer, Claude Code's input queued during a turn). It returns
	// once the CLI has been sent the message (ctx bounds the wait for a
	// CLI that acknowledges it); its text and the turn's answer come as
	// events of the running Turn. Without a turn in progress, or once
	// the turn in progress is being interrupted (its context is done),
	// the error matches ErrInvalidRequest; for a CLI that cannot be steered
	// (Capabilities.Steer), ErrUnsupported.
	Steer(ctx context.Context, prompt string) error

	// ID returns the session (thread) id the CLI reported, or "" before
	// it reported one (Claude Code reports it in the first turn). Pass it
	// as Request.SessionID to resume the conversation with Invoke or in
	// another session.
	ID() string

	// Done returns a channel that is closed when the session has ended
	// and its process tree is gone and reaped.
	Done() <-chan struct{}

	// Err returns why the session ended, once Done is closed: nil when
	// Close ended it, else the cause, as precisely as the turn that ended
	// it reported it (the context's error only when the context given to
	// OpenSession was done). Before Done is closed it returns nil.
	Err() error

	// Close ends the session and returns once the CLI and every process
	// it started are gone. Between turns it closes the CLI's standard
	// input, the end of the conversation for every CLI, and waits
	// Options.TurnInterruptGrace for it to exit; a turn in flight, or a
	// CLI that does not exit in time, gets the signal ladder, and the
	// turn returns an error matching ErrSessionClosed. Close returns nil
	// when it ended the session, however the CLI ended (at the end of its
	// input, whatever its exit status, or stopped with the ladder: the
	// tree is gone either way, and the log says when a CLI had to be
	// stopped); when the session had already ended for another reason,
	// it returns that reason (as Err). Close may be called more than
	// once, from any goroutine but these: not from
	// a TurnRequest.OnEvent callback, an Approve callback or a handler of
	// a Go MCP tool of the session, which would wait for the tree while
	// the tree waits for the callback (cancel the turn's context there
	// instead).
	Close() error
}
