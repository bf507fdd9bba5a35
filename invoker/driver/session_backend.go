package driver

import "github.com/clinvoke/clinvoke/invoker"

// A SessionBackend is a Backend whose CLI can hold a conversation in one
// long-lived process: Claude Code's stream-json input, Codex's app-server,
// Gemini CLI's Agent Client Protocol. The engine checks for it by type
// assertion when a session is opened, and only when the backend's
// Capabilities also declare Sessions; it keeps all process code, and the
// backend only says how to start the CLI and how to speak its protocol.
type SessionBackend interface {
	Backend

	// SessionCommand returns the arguments and environment of the CLI's
	// long-lived mode for the conversation req (req.Request of an empty
	// TurnRequest gives the Request that Command takes, for a CLI whose
	// long-lived mode shares its flags). Command.Stdin is ignored: standard input carries the protocol. An
	// error should wrap ErrInvalidRequest.
	SessionCommand(req *invoker.SessionRequest) (*Command, error)

	// NewSessionProtocol returns the protocol driver of one session of
	// req.
	NewSessionProtocol(req *invoker.SessionRequest) SessionProtocol
}

// A SessionProtocol speaks one session's protocol on the CLI's standard
// input and output. The engine calls its methods from one goroutine at a
// time, and writes every line they return, with a newline, to standard
// input, in order. Like a Decoder it must never panic on any input.
type SessionProtocol interface {
	// Open returns the lines that open the session (a handshake), and
	// whether the session is ready for its first turn without waiting for
	// a reply. A protocol that is not ready at once reports readiness
	// with Step.Ready.
	Open() (lines [][]byte, ready bool)

	// StartTurn returns the lines that send t's prompt and start a turn.
	// Events decoded from then on belong to the turn, until a Step
	// reports TurnEnded. An error should wrap ErrInvalidRequest.
	StartTurn(t *invoker.TurnRequest) ([][]byte, error)

	// Interrupt returns the lines that ask the CLI to end the turn in
	// progress, the way the CLI's own clients do.
	Interrupt() [][]byte

	// Decode handles one line of standard output (without its newline).
	// A non-nil error is fatal for the session, as for Decoder.Decode.
	Decode(line []byte) (Step, error)

	// Stderr inspects one line of standard error, as Decoder.Stderr.
	Stderr(line []byte) error

	// Outcome reports what the turn that just ended established. The
	// engine calls it when a Step reports TurnEnded, with the stderr
	// tail.
	Outcome(stderr string) Outcome
}

// A Step is what a SessionProtocol made of one line of output.
type Step struct {
	// Events are the turn's events the line carried.
	Events []invoker.Event
	// Write holds lines to write to the CLI's standard input, such as the
	// rest of a handshake or an answer to a request of the CLI's.
	Write [][]byte
	// Ready reports that the handshake is complete.
	Ready bool
	// TurnEnded reports that the line ended the turn in progress (with
	// success, failure or after an interrupt). Its events are the turn's
	// last.
	TurnEnded bool
}

// A Steerer is a SessionProtocol whose CLI takes a message during a turn
// (Capabilities.Steer): Session.Steer calls it, from the goroutine that
// calls the protocol's other methods, while a turn is in progress.
type Steerer interface {
	// Steer returns the lines that add prompt to the turn in progress. An
	// error should wrap ErrInvalidRequest or ErrUnsupported.
	Steer(prompt string) ([][]byte, error)
}

// A SessionRouter is a SessionBackend whose one-shot mode cannot honour
// every Request its long-lived mode can (Codex's exec mode streams no
// text as it is written, for one). Invoke asks it about each request, once
// the request is checked, and runs the ones it names as a session of one
// turn: OpenSession, Turn and Close, with the same guarantees, and one
// Result.
type SessionRouter interface {
	// InSession reports whether Invoke runs req in the long-lived mode.
	InSession(req *invoker.Request) bool
}
