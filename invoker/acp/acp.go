// Package acp runs any agent that speaks the Agent Client Protocol
// (https://agentclientprotocol.com) as an [invoker.Invoker]: Gemini CLI
// (gemini --acp), Claude Code through claude-code-acp, Codex through
// codex-acp, and every other agent with an ACP mode. An [Agent] says how to
// start it; the protocol, the process tree, the ladder and the sweep are
// the same as for every backend of this module.
//
//	inv := acp.New(acp.Agent{Name: "gemini", Command: []string{"gemini", "--acp"}})
//
// ACP has no one-shot mode: Invoke runs a session of one turn (opened,
// prompted once, closed), with the same result and guarantees as
// OpenSession, Turn and Close.
//
// # Sessions
//
// A session sends initialize (protocol version 1; the client offers the
// agent no file system and no terminal, so the agent uses its own tools),
// authenticate when a method is chosen (Agent.AuthMethod, or else an
// env_var method whose variables are all set in Request.Env, Agent.Env or
// the host's environment), then session/new in Workdir, or session/load to
// resume Request.SessionID. It then puts the session in the mode of its
// permission level (Agent.Modes, session/set_mode) and on Request.Model
// (session/set_config_option for a config option of category "model", else
// session/set_model). A turn's TurnRequest.Permission and TurnRequest.Model
// switch the same way, before its prompt is sent. session/cancel
// interrupts a turn.
//
// What an agent can do is known only once it answered initialize. The
// Invoker declares what the protocol can do (Capabilities: Model, Resume,
// Deltas, Sessions, SwitchModel, SwitchPermission), and a session refuses
// what its agent lacks, with an error matching [invoker.ErrUnsupported]
// that names it: Request.SessionID for an agent without loadSession, a
// model for an agent that offers no choice of model. An agent that answers
// initialize with another protocol version fails with a [*VersionError].
//
// # Permissions
//
// Without an Approve callback, the agent's requests for permission
// (session/request_permission) are answered from the permission level: [invoker.ReadOnly] allows the tool
// kinds that change nothing (read, search, fetch, think),
// [invoker.WorkspaceWrite] also edit, delete and move of files inside the
// working directory (every path the call names, in its locations and
// diffs, with symbolic links followed; the agent CLIs' configuration, such
// as .gemini or .claude, counts as outside; a call that names no file is
// declined), [invoker.Unlimited] everything. A declined request gives a
// KindWarning event. A mode of Agent.Modes in which the agent stops asking
// (Gemini CLI's autoEdit, claude-code-acp's acceptEdits) leaves those
// judgements to the agent: map a level to such a mode only where the
// agent's own rules are the ones you want. Every other
// request of the agent (fs/*, terminal/*, unknown methods) is answered with
// the JSON-RPC error -32601, with a KindWarning event, and the turn goes
// on.
//
// # Two-way control
//
// With Request.Approve (or SessionRequest.Approve), a request for
// permission that the permission level allows goes to the callback
// instead: Kind "command" for an execute tool (Command from its rawInput's
// command, or its title), "file_change" for edit, delete and move (Paths
// from its locations and diffs), "mcp_tool" for a tool of an MCP server,
// "tool" for the rest. A call is an MCP server's tool only when its kind is
// "other" (or none) and the names the agent makes for it say so:
// claude-code-acp's _meta.claudeCode.toolName "mcp__SERVER__TOOL", or the
// tool call id of an agent whose initialize response names it gemini-cli
// ("mcp_SERVER_TOOL__..."). Never its title: Gemini CLI titles a shell
// call with its command line, which the model writes. A call that is not
// proven a server's tool is judged by the level like any other. Allow selects the agent's allow_once option, ForSession its
// allow_always (for an edit, delete or move below Unlimited, allow_once,
// the session keeping the grant: a later request of the same tool is
// judged by the level and allowed without asking again), a denial its
// reject_once; ACP carries no message with a
// denial and no changed input (a Decision with Input is a denial). A
// request above the level is rejected without asking, with a KindWarning
// event. The session then never switches to the modes of Agent.Modes,
// which may ask less: it stays in the mode it opened in. A request still
// waiting when the turn is cancelled is answered with the outcome
// cancelled, after session/cancel, as ACP asks.
//
// An agent with a sandbox of its own that cannot work inside the kernel's
// (invoker.Sandbox), such as codex-acp's bubblewrap, is run with it off by
// Agent.SandboxOff where the kernel holds the run's filesystem and
// network; the session then sets no mode of Agent.Modes, and the kernel's
// level is the ceiling of its commands (docs/sandbox.md).
//
// Request.MCPServers go with session/new (and session/load): a Command
// server as a stdio server ({name, command, args, env}), a URL server as
// an http server ({type "http", name, url, headers}), which needs the
// agent's mcpCapabilities.http, and a Go server as the URL at which the
// run serves it on 127.0.0.1, its bearer token in the Authorization
// header, over standard input. Where the kernel's sandbox holds the run
// (invoker.Sandbox), a stdio server's env also sets NODE_OPTIONS with the
// option that keeps node's inspector closed to a command's SIGUSR1, after
// the server's own options (docs/sandbox.md). Their tools are trusted at
// every level: without a callback the agent's question about one (proven
// as above) is allowed for the rest of the session (its first
// allow_always option), with one it goes to the callback.
//
// # Events and results
//
// The first turn of a session (so every Invoke) opens with a KindRaw event
// whose Raw is the agent's answer to initialize: its protocolVersion,
// agentInfo (name, version), agentCapabilities (loadSession,
// promptCapabilities, mcpCapabilities) and authMethods. Every turn then
// opens with the KindSession event, whose Raw is the answer to session/new
// (or session/load): the session's modes, models and config options.
//
// Message and thought chunks are KindDelta events (for Request.Deltas),
// and each message or thought comes whole as one KindMessage or
// KindReasoning event when it ends: at a tool call, at a chunk of the other
// kind, or at the end of the turn. tool_call and tool_call_update are
// KindToolCall and KindToolResult (once the call completed or failed); other
// updates (plans, available commands, mode changes) are KindRaw. The
// answer (Result.Text) is the turn's messages, a blank line apart. Usage is
// the prompt response's usage, when the agent reports one.
//
// The stop reason of the prompt's response decides the turn: end_turn is
// success; cancelled an interrupted turn (the context's error when the
// turn was cancelled); max_turn_requests an [*invoker.LimitError] matching
// [invoker.ErrMaxTurns]; max_tokens and refusal an [*invoker.StreamError]
// matching [ErrMaxTokens] or [ErrRefusal]; a JSON-RPC error an
// [*invoker.StreamError] with the agent's message. An agent that breaks the
// protocol ends the session with an error matching [ErrProtocol].
//
// Images, SystemPrompt, OutputSchema, MaxTurns, MaxBudgetUSD, Fork and
// Session.Steer are not supported: they are refused with
// [invoker.ErrUnsupported] before anything starts.
package acp

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	internal "github.com/clinvoke/clinvoke/internal/acp"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// An Agent describes an agent that speaks ACP: how to start it, and how
// its modes and authentication map onto clinvoke's. Only Command is
// required.
type Agent struct {
	// Name is the agent's short name: Invoker.Name, and the prefix of
	// its errors ("gemini: ..."). The default is the base name of
	// Command[0].
	Name string

	// Command is the agent's command line in its ACP mode: the executable
	// (a name looked up on PATH, or a path) and its arguments, such as
	// {"gemini", "--acp"}. invoker.Options.Binary, when set, replaces the
	// executable; Request.ExtraArgs are appended.
	Command []string

	// Env holds KEY=VALUE pairs added to the agent's environment, over
	// the host's and invoker.Options.Env; Request.Env overrides them.
	Env []string

	// Modes maps permission levels to the agent's ACP session mode ids
	// (listed in its session/new response), such as
	// {invoker.Unlimited: "yolo"} for Gemini CLI. A mode in which the
	// agent asks less (Gemini CLI's autoEdit) leaves what it no longer
	// asks about to the agent's own rules. A level without a mode keeps the mode the session
	// opened in. Requests for permission are answered from the level
	// whatever the mode (see the package documentation).
	Modes map[invoker.Permission]string

	// AuthMethod is the id of the authentication method to use with
	// authenticate, when the agent lists it in its initialize response.
	// When empty, a method of type env_var whose required variables are
	// set (in Request.Env, Env or the host's environment) is used, and
	// none when there is no such method: the agent then relies on its
	// own login.
	AuthMethod string

	// SandboxOff holds the arguments that turn the agent's own sandbox
	// off, for an agent that runs its commands in a sandbox of its own
	// that cannot work inside the kernel's filesystem sandbox
	// (invoker.Sandbox), such as codex-acp's bubblewrap:
	//
	//	{"-c", `sandbox_mode="danger-full-access"`, "-c", `approval_policy="never"`}
	//
	// With SandboxOff set, the agent is run as package codex runs Codex
	// (driver.SandboxNester): below Unlimited, a run that asks for the
	// sandbox gets the network rules "none" (its model endpoint and MCP
	// servers only) unless it gives its own, where the host holds the
	// network part; where it does not, the "available" form runs without
	// the sandbox and the "required" form fails with invoker.ErrSandbox.
	// Where the kernel holds the run's filesystem and network, SandboxOff
	// goes on the command line (after Command's arguments, before
	// Request.ExtraArgs) and the session sets none of Modes: it keeps the
	// mode it opened in, since the agent's modes set its own sandbox again
	// (codex-acp's auto and full-access also write the project's trust to
	// its config.toml, which the kernel's sandbox holds read-only). The
	// kernel's level is then the ceiling of every command, and requests for
	// permission are still answered from the level or by Approve; which
	// ones the agent asks is set by SandboxOff (docs/acp-agents.md).
	// Elsewhere SandboxOff is not used.
	SandboxOff []string

	// InstallHint is the command that installs the agent, named in the
	// error when Command[0] is not found, such as
	// "npm install -g @google/gemini-cli".
	InstallHint string
}

// New returns an Invoker that runs agent, configured by opts (see
// invoker.Options). It panics if agent.Command is empty.
func New(agent Agent, opts ...invoker.Options) invoker.Invoker {
	if len(agent.Command) == 0 || agent.Command[0] == "" {
		panic("acp: Agent.Command is empty: set the agent's executable and arguments, such as {\"gemini\", \"--acp\"}")
	}
	agent.Command = slices.Clone(agent.Command)
	agent.Env = slices.Clone(agent.Env)
	agent.Modes = maps.Clone(agent.Modes)
	agent.SandboxOff = slices.Clone(agent.SandboxOff)
	if agent.Name == "" {
		agent.Name = filepath.Base(agent.Command[0])
	}
	if len(agent.SandboxOff) > 0 {
		return driver.New(&nester{backend{a: agent}}, opts...)
	}
	return driver.New(&backend{a: agent}, opts...)
}

// Errors of ACP sessions that package invoker has no sentinel for.
var (
	// ErrProtocol is matched by the error of a session whose agent broke
	// the protocol: it printed a JSON object that is no JSON-RPC message,
	// or a response to one of the client's requests that does not decode.
	// The session is stopped. (A line that is not JSON at all is a
	// KindWarning event, and the session goes on.)
	ErrProtocol = internal.ErrProtocol

	// ErrRefusal is matched by the *invoker.StreamError of a turn that the
	// agent ended with stop reason "refusal".
	ErrRefusal = internal.ErrRefusal

	// ErrMaxTokens is matched by the *invoker.StreamError of a turn that
	// the agent ended with stop reason "max_tokens".
	ErrMaxTokens = internal.ErrMaxTokens
)

// A VersionError reports an agent that answered initialize with a protocol
// version this client does not speak; OpenSession and Invoke return it
// (wrapped), and it matches invoker.ErrUnsupported.
type VersionError = internal.VersionError

// backend adapts an Agent to the engine.
type backend struct{ a Agent }

var (
	_ driver.SessionBackend = (*backend)(nil)
	_ driver.SessionRouter  = (*backend)(nil)
)

func (b *backend) Name() string        { return b.a.Name }
func (b *backend) Binary() string      { return b.a.Command[0] }
func (b *backend) InstallHint() string { return b.a.InstallHint }

// Capabilities are what the protocol can do; a session refuses what its
// agent lacks once the agent answered initialize.
//
// Approve is the protocol's (session/request_permission); MCPServers and
// GoTools are declared too, although an agent tells whether it reaches
// HTTP servers only in its initialize response: a session whose agent
// lacks mcpCapabilities.http fails at session/new with an error matching
// invoker.ErrUnsupported that names the server.
func (b *backend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Deltas: true, SwitchModel: true, SwitchPermission: true,
		Approve: true, GoTools: true, MCPServers: true}
}

// Hint says what to do instead of the fields the protocol lacks.
func (b *backend) Hint(field string) string {
	switch field {
	case "Images":
		return "this ACP client sends text prompts only; reference the image by its path in the prompt"
	case "SystemPrompt":
		return "ACP has no system prompt; put the instructions at the start of the prompt, or in the agent's own configuration"
	case "OutputSchema":
		return "ACP has no output schema; describe the JSON shape in the prompt and check the answer yourself"
	case "MaxTurns", "MaxBudgetUSD":
		return "ACP has no such limit; bound the turn with a deadline on the context"
	case "Fork":
		return "ACP has no stable session/fork; resume the session with Request.SessionID instead"
	case "Steer":
		return "ACP takes no message during a turn; cancel the turn and send a new prompt"
	}
	return ""
}

// InSession sends every request to the session path: ACP has no one-shot
// mode.
func (b *backend) InSession(*invoker.Request) bool { return true }

// Command is never used: InSession routes every Invoke to a session.
func (b *backend) Command(*invoker.Request) (*driver.Command, error) {
	return nil, fmt.Errorf("%w: an ACP agent runs every turn in a session", invoker.ErrUnsupported)
}

// NewDecoder is never used: InSession routes every Invoke to a session.
func (b *backend) NewDecoder(*invoker.Request) driver.Decoder { return nil }

// SessionCommand starts the agent's ACP mode.
func (b *backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	args := slices.Clone(b.a.Command[1:])
	if b.ownSandboxOff(req.Sandbox) {
		args = append(args, b.a.SandboxOff...)
	}
	args = append(args, req.ExtraArgs...)
	// ACP adapters serve until stopped (claude-code-acp keeps its input
	// open on purpose, codex-acp stays up at its end): Close stops them
	// with the ladder after a second, as the end of the conversation.
	return &driver.Command{Args: args, Env: slices.Clone(b.a.Env), RunsPastEOF: true}, nil
}

// NewSessionProtocol returns the ACP client of one session.
func (b *backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	env := append(slices.Clone(b.a.Env), req.Env...)
	modes := b.a.Modes
	if b.ownSandboxOff(req.Sandbox) {
		// The agent's modes set its own sandbox: the session keeps the
		// mode SandboxOff opened it in.
		modes = nil
	}
	return internal.New(&internal.Config{
		Name:       b.a.Name,
		Modes:      modes,
		AuthMethod: b.a.AuthMethod,
		LookupEnv: func(key string) (string, bool) {
			// The last entry wins, as in the agent's environment.
			for i := len(env) - 1; i >= 0; i-- {
				if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
					return v, true
				}
			}
			return os.LookupEnv(key)
		},
	}, req)
}
