package invoker

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Approval is an action the CLI asks permission for during a turn,
// given to the Approve callback of a run or session (Request.Approve,
// SessionRequest.Approve). Fields the CLI does not report are zero.
//
// Paths, Cwd and Workdir are in one form, so that a policy can compare them
// as they are: absolute, clean, and with every symbolic link of the part
// of the path that exists followed (what does not exist yet is kept as
// named), as the permission ceiling reads them when the CLI asks (see
// docs/approvals.md). A relative path is taken in the directory the CLI
// resolves it from: the command's Cwd, else the working directory.
type Approval struct {
	// Kind says what the action is: ApprovalCommand, ApprovalFileChange,
	// ApprovalMCPTool or ApprovalTool.
	Kind string `json:"kind"`
	// Tool is the tool call as the CLI describes it: its name ("Bash",
	// "commandExecution", "run_shell_command", "mcp__tools__record"), its
	// id (the CLI's own, as in the KindToolCall event of the same call)
	// and its input.
	Tool Tool `json:"tool"`
	// MCP names the tool of an ApprovalMCPTool action the same way for
	// every CLI: Server is the name of its server (MCPServer.Name for a
	// server of the request, else the name the CLI's own configuration
	// gives it) and Tool the name the server gives the tool ("record",
	// which Claude Code calls mcp__tools__record and Gemini CLI
	// mcp_tools_record). Both are empty for other kinds, where the CLI's
	// own fields do not name them, and for a name whose prefix names a
	// Go server of the request that has no such tool (it is another
	// server's, which the name does not tell); a title the model can
	// word is never read for them.
	MCP struct {
		Server string `json:"server,omitempty"`
		Tool   string `json:"tool,omitempty"`
	} `json:"mcp,omitzero"`
	// Command is the command line, for a command.
	Command string `json:"command,omitempty"`
	// Cwd is the directory a command runs in: the CLI's word (Codex
	// gives it), else the working directory the CLI was started in
	// (Claude Code's shell keeps a directory an earlier cd moved to, and
	// does not say). It is empty for other kinds.
	Cwd string `json:"cwd,omitempty"`
	// Paths are the files the action changes, when the CLI says: the
	// tool's own path, a moved file's destination, and every other path
	// the request names. A path the CLIs read in two ways is given in
	// both readings: ".." after a symbolic link (the kernel follows the
	// link first, Node's path.resolve drops it) and a leading "~" (which
	// some CLIs take for the home directory).
	Paths []string `json:"paths,omitempty"`
	// Workdir is the working directory of the run or session
	// (Request.Workdir, SessionRequest.Workdir), in the form of Paths:
	// through a link (/tmp on macOS) it is the link's target.
	Workdir string `json:"workdir,omitempty"`
	// Reason is why the CLI asks, in its own words (Codex gives one when
	// a command needs more than its sandbox allows).
	Reason string `json:"reason,omitempty"`
	// SessionID is the session (thread) the turn belongs to.
	SessionID string `json:"session_id,omitempty"`
	// Raw is the CLI's request as it printed it.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// The kinds of action an Approval asks about (Approval.Kind), the same for
// every CLI.
const (
	// ApprovalCommand is a shell command (Approval.Command, Approval.Cwd).
	ApprovalCommand = "command"
	// ApprovalFileChange is a change of files: an edit, a new, moved or
	// deleted file (Approval.Paths).
	ApprovalFileChange = "file_change"
	// ApprovalMCPTool is a call of a tool of an MCP server (Approval.MCP).
	ApprovalMCPTool = "mcp_tool"
	// ApprovalTool is any other tool of the CLI's (Approval.Tool).
	ApprovalTool = "tool"
)

// A Decision answers an Approval. The zero Decision denies the action.
type Decision struct {
	// Allow lets the action run.
	Allow bool `json:"allow"`
	// ForSession, with Allow, also allows actions of the same kind for
	// the rest of the session without asking again, as the CLI scopes
	// it (Codex: the same command; Claude Code and Gemini CLI: the same
	// tool). With Claude Code and the ACP agents (Gemini CLI among them),
	// a later request allowed so is still judged by the permission
	// level, an edit's paths by the path judge, before it is allowed
	// without asking (see docs/approvals.md).
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
	// agent's own commands do not see.
	Command string
	Args    []string
	Env     []string
	// URL is the address of a server that speaks streamable HTTP, with
	// Headers sent on every request (an Authorization header, say). The
	// CLI, not the program, connects to it.
	URL     string
	Headers map[string]string
}
