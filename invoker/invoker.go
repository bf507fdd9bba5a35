package invoker

import (
	"context"
	"encoding/json"
	"time"
)

// An Invoker runs one AI coding-agent CLI. Each backend package (codex,
// gemini, claude) returns one from its New function.
//
// An Invoker is safe for concurrent use; each call to Invoke or OpenSession
// owns its own process tree and shares no state with other calls.
//
// A type that embeds an Invoker to add behaviour (logging, a semaphore)
// keeps every method of the one it wraps: sessions and capabilities are
// part of the interface, not optional extras a wrapper could hide.
type Invoker interface {
	// Name returns the CLI's short name: "codex", "gemini" or "claude".
	Name() string

	// Capabilities reports which optional Request fields the CLI honours,
	// whether it can hold a Session, and the containment level its runs
	// get on this machine.
	Capabilities() Capabilities

	// Invoke runs one agent turn and returns only after the CLI and every
	// process it started have exited and been reaped.
	//
	// The returned *Result is never nil, even with an error: it holds the
	// session id, the (partial) text and the stderr tail gathered so far,
	// so a failed or cancelled turn can be inspected and resumed.
	// When ctx is cancelled or its deadline passes, the CLI is stopped with
	// the signal ladder described in the package documentation and the error
	// satisfies errors.Is(err, ctx.Err()).
	//
	// A call to Invoke is a session of one turn: req.Session() are its
	// settings, req.Turn() its turn, and the result and errors are those
	// Session.Turn gives for the same output of the CLI, but for the
	// session the caller never opened: where the turn's end also ends
	// the session (a cancel, the CLI's exit), Invoke's error says what
	// ended the run, and matches neither ErrSessionClosed nor
	// ErrInterruptIgnored.
	Invoke(ctx context.Context, req Request) (*Result, error)

	// OpenSession starts the CLI in its long-lived mode (Claude Code's
	// stream-json input, Codex's app-server, Gemini CLI's Agent Client
	// Protocol), under the same containment as Invoke, and completes the
	// protocol's handshake. Options.FirstEventTimeout, when set, also
	// bounds the handshake. A CLI without a reliable long-lived mode
	// (Capabilities.Sessions is false) gives an error matching
	// ErrUnsupported.
	//
	// ctx bounds the whole session, not only the opening: when it is
	// cancelled, the CLI's tree is stopped with the signal ladder as
	// Invoke's would be, and the session ends. Otherwise the CLI runs
	// until Session.Close, which the caller must call.
	OpenSession(ctx context.Context, req SessionRequest) (Session, error)
}

// Permission is how much an agent may change on the machine. The zero value
// means [ReadOnly].
type Permission string

// The permission levels every backend maps onto its CLI's own flags.
const (
	// ReadOnly lets the agent read files and run read-only tools. It is the
	// default.
	ReadOnly Permission = "read-only"
	// WorkspaceWrite lets the agent edit files in the workdir.
	WorkspaceWrite Permission = "workspace-write"
	// Unlimited disables the CLI's sandbox and approval checks.
	Unlimited Permission = "unlimited"
)

// String returns the permission's name; the zero value reads "read-only".
func (p Permission) String() string {
	if p == "" {
		return string(ReadOnly)
	}
	return string(p)
}

// Valid reports whether p is one of the defined levels or the zero value.
func (p Permission) Valid() bool {
	switch p {
	case "", ReadOnly, WorkspaceWrite, Unlimited:
		return true
	}
	return false
}

// Rank orders permissions: 0 for read-only, 1 for workspace-write, 2 for
// unlimited, and -1 for an unknown level.
func (p Permission) Rank() int {
	switch p {
	case "", ReadOnly:
		return 0
	case WorkspaceWrite:
		return 1
	case Unlimited:
		return 2
	}
	return -1
}

// A Request describes one agent turn. Only Prompt and Workdir are required.
type Request struct {
	// Prompt is the user's message. It must not be empty. Backends deliver
	// it on the CLI's standard input where the CLI accepts it, so it has no
	// length limit and does not show in ps.
	Prompt string

	// Workdir is the CLI's working directory. It must be an absolute path
	// to an existing directory.
	Workdir string

	// Permission is the sandbox level; the zero value means ReadOnly.
	Permission Permission

	// Model overrides the CLI's default model when not empty.
	Model string

	// SessionID resumes this session (Codex thread) when not empty.
	SessionID string

	// Fork, with SessionID, starts a new conversation from a copy of
	// SessionID's history, leaving the original as it was; the run reports
	// the new session's id. For CLIs that support it (Capabilities.Fork);
	// Fork without SessionID is ErrInvalidRequest.
	Fork bool

	// Deltas asks for the model's text as it is written: KindDelta events
	// before each whole KindMessage (and KindReasoning). For CLIs that can
	// stream it (Capabilities.Deltas); a backend whose one-shot mode cannot
	// stream runs the turn in its long-lived mode (see the backend's
	// package). Without it no KindDelta event is delivered.
	Deltas bool

	// Images are absolute paths of images to attach, for CLIs that take
	// them. A backend whose CLI cannot take images returns an error that
	// matches ErrUnsupported.
	Images []string

	// SystemPrompt replaces or extends the CLI's system prompt, for CLIs
	// that support it.
	SystemPrompt string

	// Env holds KEY=VALUE pairs for this run. They override the host's
	// value of KEY and any value set in Options.Env.
	Env []string

	// ExtraArgs are appended to the CLI's command line before the prompt
	// (if any). They are passed through unchecked; prefer the typed fields.
	ExtraArgs []string

	// OnEvent, if not nil, is called for every event as it arrives, in
	// order and one at a time: each call returns before the next begins
	// (and happens before it, in the terms of the Go memory model), so it
	// needs no lock of its own. The KindQueued events of a run waiting
	// for the Budget come on the goroutine that called Invoke, before the
	// run starts, and so do the warnings (KindWarning) of what the run
	// did after the CLI's terminal event, after KindDone, once the run
	// has ended and before Invoke returns; every other event comes from
	// one goroutine of the run's.
	// It should return quickly: reading
	// the CLI's output waits for it (time spent in it does not count
	// towards the idle timeout), and Invoke waits for it to return. If it
	// panics or calls runtime.Goexit (as t.FailNow does), no further event
	// is delivered, the process tree is killed at once and reaped, and
	// then the panic is re-raised (or Goexit called) on the goroutine that
	// called Invoke.
	OnEvent func(Event)

	// OutputSchema, when not empty, is a JSON Schema (a JSON object, draft
	// 2020-12 or draft-07) that the final answer must satisfy, for CLIs
	// that support it (Capabilities.OutputSchema). The CLI is asked for an
	// answer in that shape; Result.Structured holds the answer once it is
	// checked against the schema, and an answer that does not satisfy it
	// is a *SchemaError. A schema that is not valid JSON Schema is
	// ErrInvalidRequest, returned before anything starts. The model APIs
	// behind the CLIs want an object at the root ("type": "object").
	OutputSchema json.RawMessage

	// MaxTurns, when positive, is the most agentic turns (model responses
	// and the tool rounds between them, as the CLI counts them) the CLI
	// may take before it stops with a *LimitError, for CLIs that support it
	// (Capabilities.MaxTurns). Zero means the CLI's default; negative is
	// ErrInvalidRequest.
	MaxTurns int

	// MaxBudgetUSD, when positive, is the most the turn may spend, in US
	// dollars as the CLI computes it, before the CLI stops it with a
	// *LimitError, for CLIs that support it (Capabilities.MaxBudget). The
	// CLI checks it after each model response, so the response that
	// crosses it has already been paid for. Zero means no limit; a
	// negative, infinite or NaN value is ErrInvalidRequest.
	MaxBudgetUSD float64

	// Approve, if not nil, decides each action the CLI asks permission
	// for during a turn (Capabilities.Approve): a command, a file change,
	// an MCP tool call. ctx is the turn's: it has the values and the
	// deadline of the caller's context, and is done when the turn is
	// cancelled (once the CLI has been asked to stop it), times out or
	// ends. Permission stays the ceiling: an
	// action above it is refused without asking, and Approve decides
	// what is within it, including what the CLI would otherwise have
	// allowed on its own (Unlimited no longer bypasses the questions).
	// Approve runs on a goroutine of its own, and may block (to ask a
	// person); other events go on meanwhile. When the turn ends first,
	// the CLI is answered with a denial and Approve's answer is dropped;
	// the turn does not return before Approve has. A panic in it (or
	// runtime.Goexit) is handled as one in OnEvent. A run with Approve
	// runs in the CLI's long-lived mode. Without Approve no question is
	// asked of the program: what the permission level allows runs, and a
	// request the CLI still makes is declined so that a turn never waits.
	//
	// At most 64 questions of a turn wait for Approve at once, each on a
	// goroutine of its own: a question the CLI asks beyond them is denied
	// at once, without asking, with a message the model reads (where the
	// CLI carries one), and reported as a KindWarning event whose Tool is
	// the call it was about. Once the deadline of the caller's context has
	// passed, Approve's ctx.Err() is context.DeadlineExceeded.
	Approve func(ctx context.Context, a Approval) Decision

	// MCPServers are MCP servers whose tools the agent may call: tools
	// written in Go (MCPServer.Server, Capabilities.GoTools), and servers
	// of other programs (a command or a URL, Capabilities.MCPServers),
	// mapped onto each CLI's own configuration. Calls of their tools are
	// MCP tool calls, which the CLI asks Approve about (or the
	// permission level decides). A run with MCPServers runs in the CLI's
	// long-lived mode.
	MCPServers []MCPServer

	// Limits bound what the run's processes use together (see Limits):
	// each non-zero field replaces the same field of Options.Limits.
	Limits Limits

	// Sandbox asks the kernel to hold what the run's processes may touch
	// (see Sandbox): each non-zero field replaces the same field of
	// Options.Sandbox (Hide and Show are appended).
	Sandbox Sandbox
}

// Session returns the conversation settings of r: everything but Prompt,
// Images and OnEvent.
func (r Request) Session() SessionRequest {
	return SessionRequest{
		Workdir: r.Workdir, Permission: r.Permission, Model: r.Model, SessionID: r.SessionID,
		Fork: r.Fork, Deltas: r.Deltas,
		SystemPrompt: r.SystemPrompt, Env: r.Env, ExtraArgs: r.ExtraArgs,
		OutputSchema: r.OutputSchema, MaxTurns: r.MaxTurns, MaxBudgetUSD: r.MaxBudgetUSD,
		Approve: r.Approve, MCPServers: r.MCPServers, Limits: r.Limits, Sandbox: r.Sandbox,
	}
}

// Turn returns the turn of r: its Prompt, Images and OnEvent. (Its Model
// and Permission are the session's, so the TurnRequest leaves them
// empty.)
func (r Request) Turn() TurnRequest {
	return TurnRequest{Prompt: r.Prompt, Images: r.Images, OnEvent: r.OnEvent}
}

// A SessionRequest holds the settings of a conversation, fixed when the CLI
// starts: for a Session, given to OpenSession; for a one-turn run, the
// fields of the Request other than its turn's. Only Workdir is required.
// Each field means what the Request field of the same name means.
type SessionRequest struct {
	// Workdir is the CLI's working directory: an absolute path to an
	// existing directory.
	Workdir string
	// Permission is the sandbox level; the zero value means ReadOnly.
	Permission Permission
	// Model overrides the CLI's default model when not empty.
	Model string
	// SessionID resumes this session (Codex thread) when not empty.
	SessionID string
	// Fork, with SessionID, opens a new conversation from a copy of
	// SessionID's history, leaving the original as it was (see
	// Request.Fork).
	Fork bool
	// Deltas asks for KindDelta events in every turn (see
	// Request.Deltas).
	Deltas bool
	// SystemPrompt replaces or extends the CLI's system prompt, for CLIs
	// that support it.
	SystemPrompt string
	// Env holds KEY=VALUE pairs; they override the host's value of KEY
	// and Options.Env.
	Env []string
	// ExtraArgs are appended to the CLI's command line, unchecked.
	ExtraArgs []string
	// OutputSchema is the JSON Schema every answer must satisfy (see
	// Request.OutputSchema).
	OutputSchema json.RawMessage
	// MaxTurns bounds the agentic turns of each prompt (see
	// Request.MaxTurns).
	MaxTurns int
	// MaxBudgetUSD bounds what each prompt may spend (see
	// Request.MaxBudgetUSD).
	MaxBudgetUSD float64
	// Approve decides, for every turn, the actions the CLI asks
	// permission for (see Request.Approve).
	Approve func(ctx context.Context, a Approval) Decision
	// MCPServers are the MCP servers whose tools the agent may call, for
	// the session's length (see Request.MCPServers).
	MCPServers []MCPServer
	// Limits bound what the session's processes use together, the CLI
	// and every turn's tools, for the session's whole life (see Limits;
	// each non-zero field replaces the same field of Options.Limits).
	Limits Limits
	// Sandbox asks the kernel to hold what the session's processes may
	// touch, the CLI and every turn's tools, at the level the session is
	// opened with, for its whole life (see Sandbox).
	Sandbox Sandbox
}

// Request returns the Request of turn t in the conversation r: the
// inverse of Request.Session and Request.Turn. The turn's Model and
// Permission, when set, replace the conversation's.
func (r SessionRequest) Request(t TurnRequest) Request {
	if t.Model != "" {
		r.Model = t.Model
	}
	if t.Permission != "" {
		r.Permission = t.Permission
	}
	return Request{
		Prompt: t.Prompt, Images: t.Images, OnEvent: t.OnEvent,
		Workdir: r.Workdir, Permission: r.Permission, Model: r.Model, SessionID: r.SessionID,
		Fork: r.Fork, Deltas: r.Deltas,
		SystemPrompt: r.SystemPrompt, Env: r.Env, ExtraArgs: r.ExtraArgs,
		OutputSchema: r.OutputSchema, MaxTurns: r.MaxTurns, MaxBudgetUSD: r.MaxBudgetUSD,
		Approve: r.Approve, MCPServers: r.MCPServers, Limits: r.Limits, Sandbox: r.Sandbox,
	}
}

// A TurnRequest is one turn of a conversation: for a Session, given to
// Session.Turn; for a one-turn run, the Prompt, Images and OnEvent of the
// Request. Only Prompt is required.
type TurnRequest struct {
	// Prompt is the user's message. It must not be empty.
	Prompt string
	// Images are absolute paths of images to attach, for CLIs that take
	// them (see Request.Images).
	Images []string
	// OnEvent, if not nil, is called for every event of the turn, in
	// order, from one goroutine (see Request.OnEvent). A panic in it (or
	// runtime.Goexit) kills the CLI's tree at once, and is re-raised on the
	// goroutine that called Invoke or Turn once the tree is reaped.
	OnEvent func(Event)
	// Model, when not empty, switches the session's model from this turn
	// on, through the CLI's own request (Capabilities.SwitchModel).
	Model string
	// Permission, when not empty, switches the session's permission level
	// from this turn on (Capabilities.SwitchPermission). It may not be
	// above the level the session was opened with, which stays the
	// ceiling: a higher one is ErrInvalidRequest. A turn never runs above
	// the level it asks for: when the CLI refuses to lower its level, the
	// turn fails with a *StreamError saying so, and its prompt is not
	// sent; the session stays at the level it had.
	Permission Permission
}

// A Result is what a turn produced. Invoke returns a non-nil Result even
// when it also returns an error.
type Result struct {
	// SessionID is the session (thread) id the CLI reported, or "" if
	// none was seen yet. Pass it as Request.SessionID to resume.
	SessionID string
	// Text is the final assistant answer. After an error or a cancel it
	// is the partial answer the stream showed: the assistant's message
	// text as far as it came, whole messages and streamed increments
	// alike (each backend's package says how its CLI's messages add up).
	// Reasoning, tool calls and tool output never count as the answer.
	Text string
	// Usage holds the token counts the CLI reported.
	Usage Usage
	// ExitCode is the CLI's exit status, or -1 if it was killed by a
	// signal or never started.
	ExitCode int
	// Stderr is a bounded tail of the CLI's standard error.
	Stderr string
	// Duration is the wall time from the call (or for a session's Turn,
	// the turn) to the reaping of the tree, less Queued.
	Duration time.Duration
	// Queued is how long the run waited to be admitted to the host's
	// Budget (Options.Budget) before it started: in the queue, or at a
	// rate limit's gate. It is not part of Duration: the call took Queued
	// plus Duration. 0 without a Budget, and for a session's Turn (the
	// session waited when it was opened).
	Queued time.Duration
	// Resources are what the run's processes used (see Resources): for
	// Invoke the whole run's, for a session's Turn the turn's. They are
	// measured for every run, with limits or without; zero when nothing
	// started.
	Resources Resources
	// Containment is the level that held the run's processes: "cgroup",
	// "tracking" (Linux), "job" (Windows) or "group" (macOS, BSD); see the
	// package documentation. It is "" when no process was started.
	Containment string
	// Sandbox is the sandbox that held the run's processes: "filesystem"
	// when the kernel held the ceiling of Request.Sandbox,
	// "filesystem,network" when it held its Network rules too, "" when
	// there was none (not asked for, Unlimited without hidden paths, or
	// Mode "available" on a host without it).
	Sandbox string
	// Connections are the connections the run's processes attempted under
	// Sandbox.Network, allowed and denied: a denied one recorded when it
	// was asked for, an allowed one when it closed. For a session's Turn,
	// those recorded since the turn before (the opening's in the first
	// turn). Nil without network rules; at most the first 10000 of a run
	// are kept. Refusals of connections around the proxy that a burst
	// made faster than the host could read them, and datagrams an older
	// kernel's rate limits left without the error they are recorded
	// from, are not in it: a KindWarning event counts them ("N refusals
	// were lost: …").
	Connections []Connection
	// OutputCut reports that the CLI's stdout or stderr was still held
	// open by a process outside the run's tree at the wait delay, and was
	// closed then (see Options.WaitDelay): what that process wrote later
	// is lost. Without the CLI's terminal success event the error is
	// ErrNoResult, whose message names the cut.
	OutputCut bool

	// Structured is the final answer as JSON when Request.OutputSchema was
	// set and the turn succeeded with an answer that satisfies the schema
	// (checked by Invoke whatever the CLI guarantees); nil otherwise. Text
	// keeps the answer as the CLI printed it.
	Structured json.RawMessage
	// Turns is the number of turns the CLI reported (Claude Code's
	// num_turns: a one-answer turn is 1, a tool call and the answer 2), or
	// 0 for CLIs that report none (Codex, Gemini). The cost of the turn, where the CLI
	// reports one (Claude Code), is Usage.CostUSD.
	Turns int
}
