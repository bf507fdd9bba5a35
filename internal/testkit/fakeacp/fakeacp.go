// Package fakeacp is a scripted agent that speaks the Agent Client Protocol,
// for the tests of clinvoke's ACP client (internal/acp, invoker/acp). It
// answers the handshake, streams message and thought chunks, reports tool
// calls, asks for permission and for services the client does not offer,
// stalls, fails, and breaks the protocol on demand.
//
// Like internal/testkit/fakeagent it is not a separate program: the test
// binary runs it by re-executing itself. Main, called first in TestMain,
// turns the process into the fake when the environment asks for it
// (Script.Env). Its processes carry fakeagent's owner and tag variables, so
// fakeagent.CheckOrphans, fakeagent.Orphans and fakeagent.Survivors find
// them:
//
//	func TestMain(m *testing.M) {
//		fakeacp.Main() // runs the fake agent and exits, when asked to
//		goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
//	}
//
//	s := fakeacp.Script{Answer: "hi", Tag: fakeagent.NewTag()}
//	inv := acp.New(acp.Agent{Name: "fake", Command: []string{os.Args[0], "acp"}, Env: s.Env()})
//
// # Behaviour
//
// The fake reads one JSON-RPC message per line from standard input and
// writes one per line, each with one write call, until end of input, when
// it exits 0. It answers initialize (unless SilentInit) with
// ProtocolVersion, loadSession (unless NoLoadSession), its AuthMethods and
// agentInfo {name AgentName, else "fakeacp"}; authenticate with one of AuthMethods;
// session/new with the session id, Modes and Models (as a model config
// option with ConfigModel); session/load by adopting the id;
// session/set_mode, session/set_model and session/set_config_option by
// switching (an unknown mode is an error). Any other request gets -32601.
//
// Per session/prompt, in order: ReportState's thought, Thought, Malformed
// lines, the Permission request, Ask, Edit, the MCPCall, the ClientRequest, the Tool call, the
// HugeLine, Stream's endless steps, the answer in Chunks (ExitCode exits
// after its first chunk), StallFor, and the response with StopReason (or
// the error Fail). session/cancel ends the turn with stop reason cancelled
// (IgnoreCancel: never). Grandchild and Escapee start their processes
// before the first line is read.
package fakeacp

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

// Environment variables read by Main; Script.Env sets them.
const (
	// EnvScript holds the Script as JSON.
	EnvScript = "CLINVOKE_FAKEACP"
	// envRole selects a helper role for the processes the fake starts.
	envRole = "CLINVOKE_FAKEACP_ROLE"
)

// DefaultAnswer is the answer of a Script without Answer: "Turn N: " and
// this sentence.
const DefaultAnswer = "Hello from the fake ACP agent."

// sleepFor is how long helper processes sleep: killing them is the
// library's job.
const sleepFor = 10 * time.Minute

// A Script tells the fake what to do; the zero value answers every prompt
// at once with "Turn N: " and DefaultAnswer.
type Script struct {
	// SessionID is the id session/new reports; empty means a fresh one.
	SessionID string `json:"session_id,omitempty"`
	// Answer is the answer of every turn; Answers, those of the turns in
	// order (a turn past their end answers Answer, or the default).
	Answer  string   `json:"answer,omitempty"`
	Answers []string `json:"answers,omitempty"`
	// AnswerSize pads the answer with dots to this many bytes.
	AnswerSize int `json:"answer_size,omitempty"`
	// Chunks splits the answer into this many agent_message_chunk
	// updates (default 1), Interval apart.
	Chunks int `json:"chunks,omitempty"`
	// Interval paces chunks and Stream's steps (default 10 ms).
	Interval time.Duration `json:"interval,omitempty"`

	// Thought is sent as an agent_thought_chunk before the answer.
	Thought string `json:"thought,omitempty"`
	// ReportState sends, first in each turn, a thought "mode=M model=X"
	// naming the session's mode and model.
	ReportState bool `json:"report_state,omitempty"`
	// Tool reports a tool call of kind execute (echo hello) and its
	// completion, before the answer.
	Tool bool `json:"tool,omitempty"`
	// Permission, when set, reports a pending tool call of this ACP kind
	// and asks session/request_permission for it (options allow_once
	// "allow", allow_always "always", reject_once "reject"; a call of a
	// kind that changes files, edit, delete or move, names the file
	// permission.txt of the working directory in its locations); the call
	// completes when allowed, fails otherwise, and a thought says
	// "permission KIND: OPTION" (or "permission KIND: cancelled").
	Permission string `json:"permission,omitempty"`
	// PermissionTitle is the title of Permission's tool call (default
	// "a KIND call"); PermissionInput its rawInput, when set.
	PermissionTitle string         `json:"permission_title,omitempty"`
	PermissionInput map[string]any `json:"permission_input,omitempty"`
	// Ask, when set, is a shell command the fake asks permission to run,
	// as Gemini CLI asks: a tool call of kind execute titled with the
	// command, its rawInput {"command": Ask}, with Gemini's options
	// (allow_always "proceed_always", allow_once "proceed_once",
	// reject_once "cancel"). Allowed, it runs the command with sh -c in
	// the session's cwd and the answer starts with "approved"; otherwise
	// it starts with "denied" and the outcome.
	Ask string `json:"ask,omitempty"`
	// AskCount, above 1, makes Ask's question that many questions at
	// once, each its own tool call, all asked before any answer is
	// awaited; the answer has one line for each, in order.
	AskCount int `json:"ask_count,omitempty"`
	// Edit, when set, is a file (a path relative to the session's cwd,
	// or absolute) the fake asks permission to write, after Ask, as
	// Gemini CLI asks before its write_file tool: a tool call of kind
	// edit titled "Writing to FILE", the file's absolute path in its
	// locations and a diff of the file (oldText null for a new file,
	// newText fakeagent.EditContent) as its content, with Gemini's
	// options for an edit (allow_always "proceed_always", allow_once
	// "proceed_once", reject_once "cancel"). Allowed, it writes the file
	// (creating its directory if need be) and the answer starts with
	// "edited" ("edit failed: " and why when the write fails); otherwise
	// the file is left alone and the answer starts with "denied" and the
	// outcome.
	Edit string `json:"edit,omitempty"`
	// MCPCall, when set, calls a tool of an MCP server the client gave in
	// session/new, after the Permission request, as Gemini CLI does: it
	// asks session/request_permission for a tool call of kind "other"
	// titled "TOOL (SERVER MCP Server)", whose id starts with
	// "mcp_SERVER_TOOL__" and whose content is the arguments as JSON
	// (options allow_always "proceed_always_server" and
	// "proceed_always_tool", allow_once "proceed_once", reject_once
	// "cancel"); unless rejected, or allowed for the session before, it
	// connects to the server (a stdio command, or an http URL with its
	// headers), calls the tool, and reports the call completed with the
	// result's text, or failed. A thought then says "mcp SERVER/TOOL:
	// TEXT" (or "rejected", "cancelled", "error: ..."), and the answer
	// starts with the same TEXT. session/cancel cancels the call.
	MCPCall *MCPCall `json:"mcp_call,omitempty"`
	// NoMCPHTTP advertises mcpCapabilities.http false (sse is never
	// advertised).
	NoMCPHTTP bool `json:"no_mcp_http,omitempty"`
	// AgentName is the name in initialize's agentInfo; empty means
	// "fakeacp". "gemini-cli" says the fake is Gemini CLI, whose tool call
	// ids the client may then read for the tool's name (an MCPCall's id
	// proves its server's tool).
	AgentName string `json:"agent_name,omitempty"`
	// ClientRequest, when set, is a method the fake asks the client for
	// (fs/read_text_file, terminal/create, ...) with a string id; a thought
	// then says "METHOD: error CODE" or "METHOD: result".
	ClientRequest string `json:"client_request,omitempty"`
	// HugeLine reports, before the answer, a tool's result on one line
	// of at least this many bytes.
	HugeLine int `json:"huge_line,omitempty"`
	// Stream keeps streaming until the turn is cancelled: a message
	// chunk, then a completed tool call of kind think, Interval apart.
	Stream bool `json:"stream,omitempty"`
	// StallFor passes after the answer, before the response.
	StallFor time.Duration `json:"stall_for,omitempty"`
	// StopReason is the stop reason of the response (default end_turn).
	StopReason string `json:"stop_reason,omitempty"`
	// Fail answers the prompt with a JSON-RPC error whose data.details is
	// Fail, as Gemini CLI does.
	Fail string `json:"fail,omitempty"`
	// ExitCode makes the fake exit with this status after the answer's
	// first chunk, without a response: an agent that dies mid-turn.
	ExitCode int `json:"exit_code,omitempty"`
	// Stderr is written to standard error at start.
	Stderr string `json:"stderr,omitempty"`
	// IgnoreCancel ignores session/cancel.
	IgnoreCancel bool `json:"ignore_cancel,omitempty"`

	// SilentInit never answers initialize.
	SilentInit bool `json:"silent_init,omitempty"`
	// ProtocolVersion is the version initialize answers (default 1).
	ProtocolVersion int `json:"protocol_version,omitempty"`
	// NoLoadSession advertises loadSession false.
	NoLoadSession bool `json:"no_load_session,omitempty"`
	// Modes are the session's modes, the first current; none by default.
	Modes []string `json:"modes,omitempty"`
	// Models are the session's models, the first current, listed in
	// session/new's models (or as a config option with ConfigModel);
	// none by default. Any model id is accepted.
	Models      []string `json:"models,omitempty"`
	ConfigModel bool     `json:"config_model,omitempty"`
	// AuthMethods are listed in initialize; with RequireAuth,
	// session/new fails with -32000 until authenticate named one.
	AuthMethods []AuthMethod `json:"auth_methods,omitempty"`
	RequireAuth bool         `json:"require_auth,omitempty"`
	// Malformed breaks the protocol in each turn, before the answer:
	// "text" prints a line that is not JSON; "object" a JSON object that
	// is no JSON-RPC message; "result" answers the prompt with a result
	// that is no object (at the end of the turn).
	Malformed string `json:"malformed,omitempty"`

	// Grandchild starts a process in the fake's group that sleeps, and
	// Escapee one that leaves its session (setsid) and is orphaned.
	Grandchild bool `json:"grandchild,omitempty"`
	Escapee    bool `json:"escapee,omitempty"`
	// Transcript, if set, is a file to which the fake appends every line
	// it reads.
	Transcript string `json:"transcript,omitempty"`
	// Tag is set as fakeagent.EnvTag in the environment of the fake and
	// its descendants, for fakeagent.Survivors.
	Tag string `json:"tag,omitempty"`
}

// An MCPCall is a call of a tool of an MCP server the client gave.
type MCPCall struct {
	Server string         `json:"server"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args,omitempty"`
}

// An AuthMethod is an authentication method the fake lists.
type AuthMethod struct {
	ID string `json:"id"`
	// Type is "env_var" or "" (the agent's own).
	Type string `json:"type,omitempty"`
	// Vars are the variables of an env_var method.
	Vars []string `json:"vars,omitempty"`
}

// Env returns the KEY=VALUE entries that make a binary calling Main run s:
// pass them as acp.Agent.Env, Request.Env or invoker.Options.Env. They
// also carry fakeagent's owner variable of the calling process (and Tag),
// and make a fake built with -race exit at once.
func (s Script) Env() []string {
	b, err := json.Marshal(s)
	if err != nil {
		panic("fakeacp: " + err.Error())
	}
	env := []string{EnvScript + "=" + string(b), envRole + "="}
	for _, kv := range (fakeagent.Script{}).Env() {
		// The owner of the fake, and GORACE: nothing that would make
		// the process a fakeagent.
		if strings.HasPrefix(kv, fakeagent.EnvOwner+"=") || strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	if s.Tag != "" {
		env = append(env, fakeagent.EnvTag+"="+s.Tag)
	}
	return env
}

// Main runs the fake agent, or a helper process of it, and exits, when the
// environment asks for it; otherwise it returns at once. Call it first in
// TestMain.
func Main() {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runHelper(role))
	}
	v, ok := os.LookupEnv(EnvScript)
	if !ok {
		return
	}
	var s Script
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		fmt.Fprintf(os.Stderr, "fakeacp: bad %s: %v\n", EnvScript, err)
		os.Exit(2)
	}
	os.Exit(run(&s))
}
