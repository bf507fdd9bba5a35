package driver

import "github.com/clinvoke/clinvoke/invoker"

// A SessionBackend is a Backend whose CLI can hold a conversation in one
// long-lived process: Claude Code's stream-json input, Codex's app-server,
// Gemini CLI's Agent Client Protocol. Being one is the backend's
// declaration of invoker.Capabilities.Sessions: the engine finds it by
// type assertion, as database/sql finds a driver's optional interfaces. It
// keeps all process code; the backend only says how to start the CLI and
// how to speak its protocol.
type SessionBackend interface {
	Backend

	// SessionCommand returns the arguments and environment of the CLI's
	// long-lived mode for the conversation req (req.Request of an empty
	// TurnRequest gives the Request that Command takes, for a CLI whose
	// long-lived mode shares its flags). Command.Stdin is ignored: standard input carries the protocol. An
	// error should wrap ErrInvalidRequest.
	SessionCommand(req *invoker.SessionRequest) (*Command, error)

	// NewSessionProtocol returns the protocol driver of one session of
	// req, after SessionCommand. req.Env holds the whole environment the
	// CLI will run with (the host's as invoker.Options.InheritEnv keeps
	// it, invoker.Options.Env, the Command's Env and the request's own
	// Env, less Command.Unset), so that the protocol judges the CLI's
	// requests with what the CLI sees. A Go server that SessionCommand
	// was given as a URL (served over loopback HTTP) keeps its Server
	// here beside that URL and its Headers, so that the protocol knows
	// its tools: a tool name that server does not have is not its tool.
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
	// Approvals are actions the CLI asks permission for, which the
	// program decides (SessionRequest.Approve). The protocol sends only
	// what the permission level allows and Approve is set for; it
	// answers everything else itself, as without a callback.
	Approvals []Approval
	// Calls are messages of the CLI's for the Go MCP servers of the
	// session, for a backend that carries them in its own protocol
	// (InBandMCP).
	Calls []MCPCall
}

// An Approval is a request of the CLI's for permission that the program
// decides. The engine gives Request to SessionRequest.Approve on a
// goroutine of its own, with the turn's context, and writes the lines of
// Answer (or Cancel) when it has a decision. It calls Answer and Cancel
// under the lock that guards the protocol's methods, at most one of them,
// once.
type Approval struct {
	// Request describes the action.
	Request invoker.Approval
	// Answer returns the lines that give the CLI decision d. It must
	// answer a Decision the CLI cannot carry out (an Input it cannot
	// take) with a denial that says so.
	Answer func(d invoker.Decision) [][]byte
	// Cancel, if not nil, returns the lines that withdraw the question
	// because the turn ended first (ACP's cancelled outcome); when nil,
	// the engine answers with a denial.
	Cancel func() [][]byte
}

// An MCPCall is one JSON-RPC message of the CLI's for one of the
// session's Go MCP servers. The engine delivers Message to the server
// named Server on a goroutine of its own and writes the lines of Answer,
// which it calls with the server's reply (nil for a notification) or the
// error that kept it from one, under the lock that guards the protocol's
// methods.
type MCPCall struct {
	Server  string
	Message []byte
	Answer  func(reply []byte, err error) [][]byte
}

// An InBandMCP is a SessionBackend whose CLI can reach the Go MCP servers
// of a request (invoker.MCPServer.Server) through its own protocol, as
// Claude Code does its SDK servers. For a session whose InBand is true
// the engine hands their messages to the servers (Step.Calls), and the
// backend's SessionCommand and protocol see those entries as they are.
//
// Otherwise, and for every other SessionBackend, the engine serves the Go
// servers over streamable HTTP on 127.0.0.1, and SessionCommand and
// NewSessionProtocol see each such entry replaced by one with the URL of
// its endpoint and an Authorization header carrying the run's bearer
// token: a URL server, to be configured like any other. The token is a
// secret: it belongs in the CLI's environment or protocol, not on its
// command line, where ps shows it.
type InBandMCP interface {
	SessionBackend
	// InBand reports whether the CLI of a session of req reaches its Go
	// servers in band. The engine asks once per session or run that has
	// Go servers, before SessionCommand.
	InBand(req *invoker.SessionRequest) bool
}

// A Steerer is a SessionBackend whose CLI takes a message during a turn:
// being one is the backend's declaration of invoker.Capabilities.Steer.
// Session.Steer calls Steer while a turn is in progress, under the lock
// that guards the protocol's methods.
type Steerer interface {
	SessionBackend
	// Steer returns the lines that add prompt to the turn in progress of
	// p, a protocol this backend's NewSessionProtocol returned. An error
	// should wrap ErrInvalidRequest or ErrUnsupported.
	Steer(p SessionProtocol, prompt string) ([][]byte, error)
}

// A SandboxNester is a Backend whose CLI has a sandbox of its own that
// cannot work inside the filesystem sandbox (invoker.Sandbox), and that
// keeps its commands off the network: the CLI runs inside the kernel's
// sandbox with its own turned off only where the kernel holds its network
// too. Below Unlimited, a run of a SandboxNester that asks for the sandbox
// and gives no Network rules gets the rules "none" (its model endpoint
// and MCP servers only) where the host holds the network part; the
// Request and SessionRequest that its Command, SessionCommand and
// NewSessionProtocol see then carry Sandbox.Mode "required" and the
// rules in force (as every backend's do where the kernel holds the run:
// see Backend.Command), and the backend turns its CLI's own sandbox off. Where
// the host holds the filesystem alone, a run that asks for the
// "available" form runs without the sandbox (Result.Sandbox empty), and
// one that asks for the "required" form fails with invoker.ErrSandbox
// before anything starts; the backend sees Sandbox.Mode "off". At
// Unlimited the CLI runs inside the sandbox as any other.
// Capabilities.SandboxNote says which holds, and why.
type SandboxNester interface {
	// SandboxRefused returns why the CLI cannot work inside the
	// filesystem sandbox with its own sandbox on, or "" when it can.
	SandboxRefused() string
}

// OwnSandboxOff reports whether a SandboxNester's run whose Request (or
// SessionRequest) carries sb turns its CLI's own sandbox off: the engine
// hands it Mode "required" with the network rules in force exactly where
// the kernel holds the run's filesystem and network.
func OwnSandboxOff(sb invoker.Sandbox) bool {
	return sb.Mode == sandboxRequired && len(sb.Network) > 0
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
