// Package codex runs the OpenAI Codex CLI (npm package @openai/codex) as an
// [invoker.Invoker].
//
// Each turn runs
//
//	codex exec --json --skip-git-repo-check --cd=DIR --sandbox=MODE [--model=M] [--image=PATH]... [--output-schema=FILE] [--config=developer_instructions="..."] [ExtraArgs...] -- -
//
// with the prompt written to standard input and stdin then closed: Codex
// reads stdin to end of file before it starts ("Reading additional input
// from stdin..." on stderr is normal), so the prompt has no length limit and
// never shows in ps or reads as a flag. A turn that resumes a thread runs
//
//	codex exec --json --skip-git-repo-check --cd=DIR [--model=M] [--config=developer_instructions="..."] --config=sandbox_mode="MODE" [ExtraArgs...] resume [--image=PATH]... [--output-schema=FILE] -- THREAD_ID -
//
// because exec resume accepts no --sandbox: the permission level is restated
// as a configuration override, so a resumed turn never runs with more (or
// less) access than the caller asked for.
//
// # Request fields
//
// Permission maps to the sandbox: [invoker.ReadOnly] is "read-only",
// [invoker.WorkspaceWrite] is "workspace-write" and [invoker.Unlimited] is
// "danger-full-access". Codex in exec mode never asks for approval, so the
// sandbox is the whole policy. Under the kernel's sandbox
// ([invoker.Sandbox]), where the host holds its filesystem and its network,
// Codex's own sandbox, which cannot run inside it, is off at every level
// ("danger-full-access", in exec and on the app-server) and the kernel
// holds the level, below Unlimited with the network rules "none" when the
// request gives none; with Approve, Codex still asks as it does with its
// own sandbox (docs/sandbox.md has the measurements). SystemPrompt becomes the developer_instructions
// setting, added to Codex's own instructions. Images are attached with
// --image; Codex splits that flag's value at commas, so an image path that
// contains a comma is rejected with [invoker.ErrInvalidRequest] (copy or link
// the file to a path without one).
//
// OutputSchema is written to a temporary file, readable by its owner only,
// passed as --output-schema and removed when the run is over. Codex sends
// the schema to the model as a strict JSON-schema response format but does
// not check the answer itself (measured with 0.169.0: a non-JSON answer
// ends in turn.completed and exit 0), so the engine checks the final
// agent_message against the schema: Result.Structured holds it, or Invoke
// returns an [*invoker.SchemaError] with the text. Codex exec has no turn
// or budget limit and reports no cost: MaxTurns and MaxBudgetUSD are
// refused with [invoker.ErrUnsupported], and Result.Turns and
// Usage.CostUSD stay zero.
//
// # Events and results
//
// thread.started reports the session (thread) id; turn.started gives no
// event; agent_message items are whole messages (Codex does not stream
// deltas in --json mode) and the last one is the final answer (a turn
// stopped before turn.completed returns the latest message text the stream
// showed, completed or still in progress; reasoning never counts); reasoning items are reasoning; command_execution,
// file_change, mcp_tool_call, web_search and todo_list items are tool calls
// (item.started and item.updated) and tool results (item.completed), with the
// item id as [invoker.Tool].ID; top-level error lines and error items are
// non-fatal notices ("Reconnecting... 1/5", unknown model metadata) and
// become warnings. The turn succeeded only when turn.completed arrives;
// turn.failed carries the failure, reported as an [*invoker.StreamError].
//
// The usage Codex reports on turn.completed, and so Result.Usage, is
// cumulative over the whole thread: after a resumed turn it includes every
// earlier turn of the thread. Subtract the previous turn's Result.Usage to
// get one turn's tokens. Codex reports no total; TotalTokens stays zero.
//
// # Live turns
//
// codex exec cannot stream text as it is written, and cannot fork a
// thread. Invoke therefore runs a Request with Deltas or Fork as a session
// of one turn on the app-server (see OpenSession below and
// [driver.SessionRouter]): the same containment and guarantees, and a
// Result as a session's turn gives it (the thread id, the final message,
// the thread's usage). There, item/agentMessage/delta notifications
// become [invoker.KindDelta] events, and the whole message follows each
// streamed one (item/completed), unchanged.
//
// Fork, with SessionID, opens the session with thread/fork: a new thread
// holding a copy of the old one's history, which stays as it was; the run
// and the session report the new thread's id.
//
// In a session, TurnRequest.Model and TurnRequest.Permission become
// turn/start's model, and its sandboxPolicy (the sandbox of the
// permission, as the session's opening maps it) with the approval policy
// "never"; Codex keeps them for the turns that follow. Session.Steer sends
// turn/steer, naming the running turn: Codex gives the message to the
// model with the turn's next request. If Codex refuses it (the turn had
// just ended), the turn gets a warning. A steer while the model is
// writing makes Codex drop that answer and ask the model again with the
// steer (measured with 0.169.0): the deltas already delivered of the
// dropped message get no whole message after them, and the turn's answer
// is the one to the steered request.
//
// Rate limits: the app-server relays the provider's rate-limit headers
// (x-codex-primary-used-percent, -window-minutes and -reset-at, and the
// same for secondary) as account/rateLimits/updated, which becomes one
// [invoker.KindRateLimit] event per window ("primary", "secondary"; a
// limit family other than Codex's own is prefixed with its id, as in
// "codex_other.primary"). A retry is a warning with [invoker.Retry] set:
// the app-server's error notification with willRetry, or exec's
// "Reconnecting... 1/5 (...)" notice, giving the attempt, the number of
// retries and the HTTP status where Codex names it (Codex does not say
// how long it waits). A turn that fails on a rate or usage limit
// (codexErrorInfo usageLimitExceeded or rateLimitExceeded, a last status
// of 429, or such words in the message) matches [invoker.ErrRateLimited],
// as an [*invoker.LimitError] whose ResetsAt is the latest reset of the
// windows the session last saw used up (zero when none was: Codex reports
// no reset for a short-term 429, and exec relays no snapshot at all).
//
// # Two-way control
//
// A run or session with Request.Approve or Request.MCPServers runs on the
// app-server. With Approve, Codex runs with the approval policy
// "untrusted" and asks before commands, file changes and MCP tool calls;
// each question goes to the callback. The permission level's sandbox
// stays the ceiling (a permission profile keeps Codex from rerunning an
// approved command outside it), and Codex takes neither a changed input
// nor a refusal's message: the model reads Codex's own words. Go MCP
// servers are served on 127.0.0.1 and reached by URL; every server of the
// request is an mcp_servers entry of the config map of the thread's
// opening (thread/start, thread/resume, thread/fork), written to
// app-server's standard input, with its header values (the Go servers'
// bearer token) and a command server's Env: none of it is on the command
// line or in app-server's environment, which the agent's commands, running
// as Codex's user inside the same sandbox, could read in /proc. Codex's
// memory still holds them, and a command can read that (docs/sandbox.md).
// Without Approve their tools run without asking. The wire shapes are
// documented with the protocol (approval.go, mcp.go); all of it was
// measured with 0.169.0.
package codex

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// New returns an Invoker that runs the codex CLI. With no options the
// binary is found on PATH as "codex".
func New(opts ...invoker.Options) invoker.Invoker { return driver.New(backend{}, opts...) }

// backend adapts the Codex CLI to the invoker engine. It has no state.
type backend struct{}

var _ driver.Backend = backend{}

func (backend) Name() string        { return "codex" }
func (backend) Binary() string      { return "codex" }
func (backend) InstallHint() string { return "npm install -g @openai/codex" }

func (backend) NewDecoder(*invoker.Request) driver.Decoder { return newDecoder() }

// Capabilities: codex takes every optional field but the limits: codex
// exec has no turn or budget flag. Deltas and Fork are the app-server's
// (InSession); so are steering and the switches between turns, through
// turn/steer and turn/start's overrides.
func (backend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Images: true, SystemPrompt: true, OutputSchema: true,
		Fork: true, Deltas: true, SwitchModel: true, SwitchPermission: true,
		Approve: true, GoTools: true, MCPServers: true}
}

var _ driver.SessionRouter = backend{}

// InSession runs in the app-server the requests exec cannot honour: exec
// --json prints agent messages only whole, and has no fork.
func (backend) InSession(req *invoker.Request) bool { return req.Deltas || req.Fork }

// Hint says what to do instead of the fields codex lacks.
func (backend) Hint(field string) string {
	switch field {
	case "MaxTurns", "MaxBudgetUSD":
		return "codex exec has no turn or budget limit and reports no cost; bound the run with a deadline on the context instead"
	}
	return ""
}

// SandboxRefused says why Codex cannot work inside the filesystem sandbox
// (invoker.Sandbox) with its own sandbox on: its own sandbox, in which it
// runs commands, applies patches and (in its long-lived mode with a
// permission profile) loads its instructions, is bubblewrap, whose user
// namespace needs a write to /proc/self/uid_map that the kernel's ceiling
// refuses (measured with 0.169.0: "bwrap: setting up uid map: Permission
// denied"); its legacy Landlock pipeline (features.use_legacy_landlock)
// refuses every command whose policy restricts the filesystem ("requires
// bubblewrap to isolate app-server sockets"). Where the kernel holds the
// network too, the engine runs Codex
// inside it and tells the backend (driver.SandboxNester), which turns
// Codex's own sandbox off (ownSandboxOff). docs/sandbox.md has the
// measurements.
func (backend) SandboxRefused() string {
	return "Codex's own sandbox (bubblewrap) cannot set up its user namespace inside it, and keeps Codex's commands off the network (docs/sandbox.md)"
}

var _ driver.SandboxNester = backend{}

// ownSandboxOff reports whether a run whose request carries sb runs
// with Codex's own sandbox off (driver.OwnSandboxOff), where the kernel
// holds the run's filesystem and network. Its level is then the kernel's,
// and the library's judge of Codex's questions (approval.go) still asks
// the program where it did.
func ownSandboxOff(sb invoker.Sandbox) bool { return driver.OwnSandboxOff(sb) }

// sandboxed reports whether the kernel holds a run whose request carries
// sb: the engine gives a SandboxNester Mode "required" where it does, and
// "off" where it does not (driver's backendSandbox).
func sandboxed(sb invoker.Sandbox) bool {
	return sb.Mode == "required"
}

// sandboxMode returns Codex's sandbox policy for a permission level, under
// the sandbox sb the engine gives the run: "danger-full-access" at every
// level where the kernel holds it (ownSandboxOff).
func sandboxMode(p invoker.Permission, sb invoker.Sandbox) (string, error) {
	switch p {
	case "", invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited:
	default:
		return "", fmt.Errorf("%w: unknown permission %q", invoker.ErrInvalidRequest, string(p))
	}
	switch {
	case ownSandboxOff(sb), p == invoker.Unlimited:
		return "danger-full-access", nil
	case p == invoker.WorkspaceWrite:
		return "workspace-write", nil
	}
	return "read-only", nil
}

func (backend) Command(req *invoker.Request) (*driver.Command, error) {
	mode, err := sandboxMode(req.Permission, req.Sandbox)
	if err != nil {
		return nil, err
	}
	for _, img := range req.Images {
		// Both exec and exec resume declare --image with a ',' value
		// delimiter: the path would arrive in pieces.
		if strings.Contains(img, ",") {
			return nil, fmt.Errorf("%w: Request.Images: codex splits --image at commas, so %q cannot be passed; use a path without a comma", invoker.ErrInvalidRequest, img)
		}
	}

	args := []string{"exec", "--json", "--skip-git-repo-check"}
	if req.Workdir != "" {
		// The engine also starts codex in Workdir; --cd makes it the
		// agent's working root even if a config file says otherwise.
		args = append(args, "--cd="+req.Workdir)
	}
	resume := req.SessionID != ""
	if !resume {
		args = append(args, "--sandbox="+mode)
	}
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	if !resume {
		for _, img := range req.Images {
			args = append(args, "--image="+img)
		}
	}
	// The schema file is written last, once nothing can fail, so that an
	// error never leaves it behind; Cleanup removes it after the run.
	var schemaFile string
	var cleanup func()
	if len(req.OutputSchema) > 0 {
		var err error
		if schemaFile, err = writeSchema(req.OutputSchema); err != nil {
			return nil, err
		}
		cleanup = func() { os.Remove(schemaFile) }
	}
	if schemaFile != "" && !resume {
		args = append(args, "--output-schema="+schemaFile)
	}
	if req.SystemPrompt != "" {
		args = append(args, "--config=developer_instructions="+tomlString(req.SystemPrompt))
	}
	if resume {
		// exec resume rejects --sandbox (docs/cli-facts.md); the same policy as
		// a configuration override keeps the permission on resume.
		args = append(args, "--config=sandbox_mode="+tomlString(mode))
	}
	args = append(args, req.ExtraArgs...)
	if resume {
		args = append(args, "resume")
		for _, img := range req.Images {
			args = append(args, "--image="+img)
		}
		if schemaFile != "" {
			args = append(args, "--output-schema="+schemaFile)
		}
		args = append(args, "--", req.SessionID, "-")
	} else {
		args = append(args, "--", "-")
	}
	return &driver.Command{Args: args, Stdin: req.Prompt, Cleanup: cleanup}, nil
}

// writeSchema writes an output schema to a new file, readable by its owner
// only, for --output-schema, and returns its path. The engine has checked
// that the schema is a JSON Schema object.
func writeSchema(schema []byte) (string, error) {
	f, err := os.CreateTemp("", "clinvoke-codex-schema-*.json")
	if err != nil {
		return "", fmt.Errorf("Request.OutputSchema: writing the schema file for codex --output-schema: %w", err)
	}
	_, err = f.Write(schema)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("Request.OutputSchema: writing the schema file for codex --output-schema: %w", err)
	}
	return f.Name(), nil
}

// tomlString quotes s as a TOML basic string, the form Codex's --config
// parses its values in.
func tomlString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteString(strconv.FormatInt(int64(r)>>4, 16))
			b.WriteString(strconv.FormatInt(int64(r)&0xf, 16))
		default:
			// Invalid UTF-8 decodes as U+FFFD and is written as such:
			// TOML strings must be valid UTF-8.
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
