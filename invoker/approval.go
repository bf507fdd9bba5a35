package invoker

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Approval is an action the CLI asks permission for during a turn,
// given to the Approve callback of a run or session (Request.Approve,
// SessionRequest.Approve). Fields the CLI does not report are zero.
type Approval struct {
	// Kind says what the action is: "command" (a shell command),
	// "file_change" (an edit, a new or deleted file), "mcp_tool" (a tool of
	// an MCP server), or "tool" for any other tool of the CLI's.
	Kind string `json:"kind"`
	// Tool is the tool call as the CLI describes it: its name ("Bash",
	// "commandExecution", "run_shell_command", an MCP tool's name), its id
	// (the CLI's own, as in the KindToolCall event of the same call) and
	// its input.
	Tool Tool `json:"tool"`
	// Command is the command line, for a command.
	Command string `json:"command,omitempty"`
	// Cwd is the directory the command runs in: the CLI's word, else
	// the run's Workdir.
	Cwd string `json:"cwd,omitempty"`
	// Paths are the files an edit changes, when the CLI says.
	Paths []string `json:"paths,omitempty"`
	// Reason is why the CLI asks, in its own words (Codex gives one when
	// a command needs more than its sandbox allows).
	Reason string `json:"reason,omitempty"`
	// SessionID is the session (thread) the turn belongs to.
	SessionID string `json:"session_id,omitempty"`
	// Raw is the CLI's request as it printed it.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// A Decision answers an Approval. The zero Decision denies the action.
type Decision struct {
	// Allow lets the action run.
	Allow bool `json:"allow"`
	// ForSession, with Allow, also allows actions of the same kind for
	// the rest of the session without asking again, as the CLI scopes
	// it (Codex: the same command; Claude Code and Gemini CLI: the same
	// tool).
	ForSession bool `json:"for_session,omitempty"`
	// Input, with Allow, replaces the tool call's input (a JSON object),
	// for CLIs that take a changed input (Claude Code). A CLI that cannot
	// run a changed input is answered with a denial naming the reason,
	// never with the original input.
	Input json.RawMessage `json:"input,omitempty"`
	// Message, for a denial, tells the model why; it reads it with the
	// denial. Empty means a generic refusal.
	Message string `json:"message,omitempty"`
}

// An MCPServer is an MCP server whose tools the agent may call during a
// run or session (Request.MCPServers). Exactly one of Server, Command and
// URL is set.
//
// A Server (tools written in Go) is served by the run for the run's
// length: to Claude Code over its own control protocol, to the other CLIs
// over streamable HTTP on 127.0.0.1 behind a random per-run bearer token.
// A tool call's context is its turn's: it has the values and the deadline
// of the context the turn was given (Invoke's, Session.Turn's), and is
// cancelled when the turn is cancelled (once the CLI has been asked to
// stop it, so that the handler's answer cannot complete the turn), times
// out or ends, or the run ends; once the deadline has passed, its Err is
// context.DeadlineExceeded. A call the CLI makes between the turns of a
// session has the session's context. The run does not return while a
// handler still runs.
//
// A Command server is started by the CLI, inside the run's containment,
// and dies with the run; a URL server is reached by the CLI.
type MCPServer struct {
	// Name is the server's name, which the CLI shows the model with its
	// tools (Claude Code calls a tool "mcp__<name>__<tool>"). Names are
	// unique in a request, and made of letters, digits, '-' and '_'.
	Name string
	// Server, when not nil, is a go-sdk server whose tools the run serves
	// (see mcp.AddTool). The same server may serve several runs at once.
	Server *mcp.Server
	// Command and Args start a server that speaks MCP on its standard
	// input and output; Env holds KEY=VALUE pairs for it, which the
	// agent's own commands do not see (for Codex, unless the host's
	// environment already has the variable: see package codex).
	Command string
	Args    []string
	Env     []string
	// URL is the address of a server that speaks streamable HTTP, with
	// Headers sent on every request (an Authorization header, say). The
	// CLI, not the program, connects to it.
	URL     string
	Headers map[string]string
}
