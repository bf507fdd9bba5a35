// Package claude runs Anthropic's Claude Code CLI (npm package
// @anthropic-ai/claude-code) as an [invoker.Invoker].
//
// Each turn runs
//
//	claude --print --output-format=stream-json --verbose --permission-mode=MODE [--disallowedTools=RULES [--setting-sources=]] [--model=M] [--append-system-prompt=S] [--resume=SESSION_ID [--fork-session]] [--json-schema=SCHEMA] [--max-turns=N] [--max-budget-usd=AMOUNT] [--include-partial-messages] [ExtraArgs...]
//
// with the prompt written to standard input, then closed; Claude Code takes
// no positional prompt here, so a prompt such as "--help" is never read as
// a flag and does not show in ps. --verbose is required with stream-json.
//
// # Request fields
//
// Permission maps to the permission mode: [invoker.ReadOnly] is "default"
// (in print mode every tool use that needs approval is denied) with the
// editing tools disallowed outright and no settings files loaded
// (--setting-sources= with no source). Claude Code applies the allow rules
// of the user's and the project's settings in every permission mode, plan
// mode included: an allow rule such as Bash(touch:*) lets a turn in
// "default" or "plan" mode create files (measured with 2.1.197). Loading no
// settings keeps a read-only turn read-only; Bash still runs the commands
// Claude Code itself deems read-only (ls, cat, echo, grep, ...). To run a
// read-only turn with the user's settings after all, pass
// --setting-sources=user,project,local in Request.ExtraArgs, which come
// later on the command line and win.
// [invoker.WorkspaceWrite] is "acceptEdits" (edits in the working
// directories are approved, other commands that need approval are denied),
// with Edit rules in --disallowedTools that keep the agent CLIs'
// configuration in them out of reach (.gemini, .codex, .agents, .env, ...:
// Claude Code protects only its own; see configDenied);
// [invoker.Unlimited] is "bypassPermissions", with IS_SANDBOX=1 in the
// environment because Claude Code refuses that mode as root otherwise. The
// mode is passed on every turn, so a resumed session keeps it.
//
// SystemPrompt is appended to Claude Code's own system prompt
// (--append-system-prompt), which keeps the instructions its tools depend on;
// to replace the prompt entirely pass --system-prompt=... in
// Request.ExtraArgs. Sessions are stored per working directory: resume a
// session with the same Workdir it was started in. Claude Code has no
// working-directory flag (the engine starts it in Workdir) and no image
// flag: Images is reported with [invoker.ErrUnsupported]; name the image
// files in the prompt instead and Claude Code reads them with its Read tool.
//
// OutputSchema is passed, compacted, as --json-schema (at most 128 KiB, the
// longest argument Linux takes). Claude Code then offers the model a
// StructuredOutput tool whose input is the answer, checks the input
// against the schema itself (a mismatch goes back to the model as a tool
// error) and reports it as the result's structured_output, which becomes
// Result.Structured; Result.Text holds the same JSON as text. When the
// model answers in plain text twice, Claude Code gives up and reports
// success without structured_output: the engine then checks the text
// against the schema (captured with 2.1.197: json-schema.stdout and
// json-schema-text.stdout in testdata). MaxTurns is --max-turns and
// MaxBudgetUSD is --max-budget-usd; reaching either ends the turn with a
// result of subtype error_max_turns or error_max_budget_usd and exit 1,
// reported as an [*invoker.LimitError] with the session id. The budget is
// checked after each model response, so the response that crosses it has
// been paid for.
//
// The environment loses CLAUDECODE, CLAUDE_CODE_ENTRYPOINT and
// CLAUDE_CODE_SSE_PORT: a host that itself runs under Claude Code has them
// set, and the first makes a nested claude refuse to start, the others
// make it pose as an SDK client or attach to the host's IDE.
//
// Fork, with SessionID, adds --fork-session to --resume: Claude Code copies
// the conversation into a new session, reports the new id in its system
// init line and leaves the original as it was. Deltas adds
// --include-partial-messages (see Events and results).
//
// # Events and results
//
// system init reports the session id. system api_retry notices are
// warnings with Event.Retry set (attempt, max_retries, retry_delay_ms,
// error_status), as in
//
//	{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit",...}
//
// where the delay is the server's retry-after when it sent one. A
// rate_limit_event is a [invoker.KindRateLimit] event,
//
//	{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795750800,"rateLimitType":"five_hour",...},...}
//
// (resetsAt in Unix seconds, utilization a fraction of 1 when present);
// Claude Code 2.1.197 reads the anthropic-ratelimit-unified-* headers and
// prints these only for a claude.ai login, not for an API key. A turn that
// fails rate limited (the result's api_error_status 429) matches
// [invoker.ErrRateLimited] and is reported as an [*invoker.LimitError]
// whose ResetsAt is the resetsAt of a rejected rate_limit_event of the
// turn, when there was one (the retry delay is not a reset time). Each assistant line holds one content block: text is a message,
// thinking is reasoning and tool_use a tool call; a synthetic assistant
// message that carries an error (model "<synthetic>") is an error event, not
// a message. tool_result blocks in user lines are tool results, carrying the
// call's name and input. With Request.Deltas (--include-partial-messages),
// stream_event text and thinking deltas become [invoker.KindDelta] events;
// Claude Code prints the whole assistant block after its deltas, so the
// KindMessage and KindReasoning events are the same with or without them. The
// turn succeeded only when the result line has is_error false; its result
// field is the final answer. A turn stopped before its result returns as
// partial text the text blocks of the latest assistant message that had
// any, with the deltas streamed since. Claude Code exits 0 on SIGINT and reports API
// errors as is_error inside a result of subtype "success", so the exit
// status alone means nothing. Usage is the result's usage, cached input
// being cache reads, with total_cost_usd as CostUSD (reported on success
// and on both limit errors); Result.Turns is the result's num_turns (1 for
// a plain answer, 2 for a tool call and the answer, and 2 for an answer
// given through StructuredOutput: Claude Code counts the tool's round).
//
// # Two-way control
//
// A run or session with Request.Approve or Request.MCPServers runs in the
// stream-json session mode (see SessionCommand), where Claude Code speaks
// the control protocol of the Claude Agent SDKs. With Approve, Claude Code
// runs in the permission mode "default" at every level, with
// --permission-prompt-tool=stdio, and asks before each action with a
// can_use_tool control request, which the callback answers within the
// permission level (the ceiling: above it the protocol denies without
// asking). A Go MCP server is an SDK server of Claude Code's, reached with
// mcp_message control requests over the same pipes (no socket); a Command
// or URL server is configured with --mcp-config. Without Approve the
// request's MCP servers' tools are pre-allowed (--allowedTools). The wire
// shapes are documented with the protocol (approval.go, mcp.go); all of
// it was measured with 2.1.197.
package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// New returns an Invoker that runs the claude CLI. With no options the
// binary is found on PATH as "claude".
func New(opts ...invoker.Options) invoker.Invoker { return driver.New(backend{}, opts...) }

// backend adapts Claude Code to the invoker engine. It has no state.
type backend struct{}

var _ driver.Backend = backend{}

func (backend) Name() string        { return "claude" }
func (backend) Binary() string      { return "claude" }
func (backend) InstallHint() string { return "npm install -g @anthropic-ai/claude-code" }

func (backend) NewDecoder(*invoker.Request) driver.Decoder { return newDecoder() }

// Capabilities: Claude Code has no image flag; everything else, two-way
// control included, was measured with 2.1.197 (see the package doc).
func (backend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, SystemPrompt: true,
		OutputSchema: true, MaxTurns: true, MaxBudget: true,
		Fork: true, Deltas: true, SwitchModel: true, SwitchPermission: true,
		Approve: true, GoTools: true, MCPServers: true}
}

// Hint says what to do instead of the fields claude lacks.
func (backend) Hint(field string) string {
	if field == "Images" {
		return "claude has no image flag; name the image files (absolute paths) in the prompt and Claude Code reads them with its Read tool"
	}
	return ""
}

// nestedVars are set by a running Claude Code for the processes it starts;
// inherited by a nested claude they break it (see the package doc).
var nestedVars = []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"}

// maxSchemaArg bounds the --json-schema argument: Linux refuses a single
// argument longer than 32 pages (MAX_ARG_STRLEN, 128 KiB) with E2BIG.
const maxSchemaArg = 128<<10 - len("--json-schema=") - 1

// readOnlyDenied are the built-in tools that change files.
const readOnlyDenied = "Edit,Write,NotebookEdit"

// configDenied returns the permission rules that keep a turn in the mode
// acceptEdits (WorkspaceWrite without an Approve callback) from editing
// the agent CLIs' configuration inside the working directory: an Edit rule
// (which binds Write, MultiEdit and NotebookEdit too) for each of
// internal/workspace's configuration names, as a file or a directory, at
// any depth. Claude Code protects its own (.claude, .mcp.json, .git) as
// "sensitive files", not the other CLIs' (measured with 2.1.197:
// .gemini/settings.json and .codex/config.toml were written).
func configDenied() string {
	var rules []string
	for _, n := range workspace.ConfigNames() {
		rules = append(rules, "Edit(**/"+n+")", "Edit(**/"+n+"/**)")
	}
	return strings.Join(rules, ",")
}

// Command returns the one-shot command line of req. Runs with Approve or
// MCPServers never come here: the engine runs them as sessions of one
// turn (see SessionCommand).
func (backend) Command(req *invoker.Request) (*driver.Command, error) {
	return command(req, false)
}

// command returns the command line of req; asking, for a session with an
// Approve callback, keeps Claude Code in the permission mode "default"
// whatever the level, so that it asks (see SessionCommand).
func command(req *invoker.Request, asking bool) (*driver.Command, error) {
	args := []string{"--print", "--output-format=stream-json", "--verbose"}
	var env []string
	mode, ok := permissionMode(req.Permission)
	if !ok {
		return nil, fmt.Errorf("%w: unknown permission %q", invoker.ErrInvalidRequest, string(req.Permission))
	}
	if asking {
		mode = "default"
	}
	args = append(args, "--permission-mode="+mode)
	switch {
	case req.Permission == "" || req.Permission == invoker.ReadOnly:
		args = append(args, "--disallowedTools="+readOnlyDenied, "--setting-sources=")
	case mode == "acceptEdits":
		args = append(args, "--disallowedTools="+configDenied())
	case mode == "bypassPermissions":
		// As root, Claude Code refuses bypassPermissions unless it is
		// told it runs in a sandbox (docs/cli-facts.md).
		env = append(env, "IS_SANDBOX=1")
	}
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	if req.SystemPrompt != "" {
		args = append(args, "--append-system-prompt="+req.SystemPrompt)
	}
	if req.SessionID != "" {
		// --resume takes an optional value: only the = form binds it.
		args = append(args, "--resume="+req.SessionID)
		if req.Fork {
			args = append(args, "--fork-session")
		}
	} else if req.Fork {
		return nil, fmt.Errorf("%w: Request.Fork without Request.SessionID: set SessionID to the conversation to fork", invoker.ErrInvalidRequest)
	}
	if len(req.OutputSchema) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, req.OutputSchema); err != nil {
			return nil, fmt.Errorf("%w: Request.OutputSchema: %v", invoker.ErrInvalidRequest, err)
		}
		if b.Len() > maxSchemaArg {
			return nil, fmt.Errorf("%w: Request.OutputSchema is %d bytes once compacted; claude takes the schema as a command-line argument, which Linux limits to %d bytes", invoker.ErrInvalidRequest, b.Len(), maxSchemaArg)
		}
		args = append(args, "--json-schema="+b.String())
	}
	if req.MaxTurns > 0 {
		args = append(args, "--max-turns="+strconv.Itoa(req.MaxTurns))
	}
	if req.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd="+strconv.FormatFloat(req.MaxBudgetUSD, 'f', -1, 64))
	}
	if req.Deltas {
		args = append(args, "--include-partial-messages")
	}
	args = append(args, req.ExtraArgs...)
	return &driver.Command{
		Args:  args,
		Env:   env,
		Unset: append([]string(nil), nestedVars...),
		Stdin: req.Prompt,
	}, nil
}

// permissionMode returns Claude Code's permission mode for p, the same on
// the command line and in a session's set_permission_mode request, and
// false for an unknown level.
func permissionMode(p invoker.Permission) (string, bool) {
	switch p {
	case "", invoker.ReadOnly:
		return "default", true
	case invoker.WorkspaceWrite:
		return "acceptEdits", true
	case invoker.Unlimited:
		return "bypassPermissions", true
	}
	return "", false
}
