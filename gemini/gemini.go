// Package gemini runs Google's Gemini CLI (npm package @google/gemini-cli)
// as an [invoker.Invoker].
//
// Each turn runs
//
//	gemini --output-format=stream-json --approval-mode=MODE [--model=M] [--resume=SESSION_ID] [--admin-policy=FILE] [ExtraArgs...] --prompt=
//
// with the prompt written to standard input, then closed. Gemini runs
// headless whenever its stdin is not a terminal and reads stdin as the
// prompt; the --prompt option, whose value Gemini appends to stdin, is given
// as the empty string so that it only states headless mode and no text of
// the prompt ever sits in argv, where it could read as a flag or show in ps.
// Gemini reads at most 8 MiB (8,388,608 UTF-16 code units) of stdin and
// silently drops the rest, so a longer prompt is rejected with
// [invoker.ErrInvalidRequest] instead of being truncated.
//
// # Request fields
//
// Permission maps to the approval mode: [invoker.ReadOnly] is "default"
// (headless Gemini then declares only read-only tools), [invoker.WorkspaceWrite]
// is "auto_edit" (edit tools approved, no shell; with an admin policy that
// keeps them off the agent CLIs' configuration, see policy.go) and
// [invoker.Unlimited] is "yolo" (every tool, shell included). The mode is passed on every turn, so
// a resumed session keeps it. Gemini has no working-directory flag: the
// engine starts it in Workdir.
//
// Gemini cannot honour five fields, and Invoke returns an error matching
// [invoker.ErrUnsupported] for them before anything starts:
//   - Images: Gemini has no image flag. Reference the file in the prompt as
//     @path instead (relative to Workdir; Gemini reads files inside its
//     workspace only, see --include-directories).
//   - SystemPrompt: Gemini only reads a system prompt from a file named by
//     GEMINI_SYSTEM_MD, and that file replaces its whole built-in prompt.
//     Write the file yourself and pass GEMINI_SYSTEM_MD=/path/file.md in
//     Request.Env.
//   - OutputSchema, MaxTurns, MaxBudgetUSD: gemini 0.61.0 has no flag for an
//     answer schema, a turn limit or a budget (docs/structured-output.md).
//     Its settings key model.maxSessionTurns does limit turns; a turn it
//     stops (result error FatalTurnLimitedError, exit 53) is reported as an
//     [*invoker.LimitError] with Limit "MaxTurns" and the session id. Gemini
//     reports no cost: Usage.CostUSD and Result.Turns stay zero.
//
// Gemini refuses to run in a folder it does not trust (exit status 55). The
// backend does not pass --skip-trust on its own: trusting a folder lets its
// settings start hooks and MCP servers. Pass "--skip-trust" in
// Request.ExtraArgs, or GEMINI_CLI_TRUST_WORKSPACE=true in the environment,
// for folders you trust.
//
// # Events and results
//
// init reports the session id; the echo of the prompt gives no event;
// Gemini streams each assistant message in chunks: each chunk is a
// [invoker.KindDelta] (delivered with Request.Deltas), and the whole
// message follows as one [invoker.KindMessage] before the next line of
// another type (a tool call, an error, the result). The final answer is
// the messages' concatenation (messages that a tool call separates are
// joined by a blank line), as is the partial text of a turn stopped before
// its result (which gets no whole message: nothing ended it); tool_use and
// tool_result are tool calls and results, matched by tool_id (the result
// carries the call's name and input); error lines with severity "warning"
// are warnings, others errors. The turn succeeded only when the terminal result line has status
// "success": Gemini exits 0 on signals and on some failures. A result with
// status "error" is reported as an [*invoker.StreamError]. Without a result
// line, Gemini's exit status is explained: 41 is missing authentication
// configuration, 42 an input error, 52 a configuration error, 53 the session
// turn limit, 55 an untrusted folder, and an API failure exits with its HTTP
// status modulo 256 (144 = 400, 145 = 401, 173 = 429, 244 = 500, ...).
// Usage is the result's stats (all models of the turn, including Gemini's
// routing calls).
//
// # Rate limits
//
// A turn that Gemini's retries did not get past a rate limit (HTTP 429)
// fails with an error matching [invoker.ErrRateLimited], reported as an
// [*invoker.LimitError] whose ResetsAt is set when the error says when to
// retry: Gemini turns a google.rpc.RetryInfo (retryDelay "7s") into
// "Suggested retry after 7s." in its message, and a per-minute quota
// failure into 60s. Gemini retries a failed model request up to
// general.maxAttempts times (10 by default, in settings.json) and reports
// each retry only on standard error ("Attempt 1 failed ... Retrying after
// 5521ms..."); Invoke reports each as a [invoker.KindWarning] with
// Event.Retry, with the next line of standard output (the Decoder's Stderr
// hook cannot send events), so a retry shows when the retried request
// answers. A session reports none: in ACP mode Gemini's standard error
// reaches the pipe only when it exits (measured with 0.61.0). Gemini
// reports no rate-limit state: there is no [invoker.KindRateLimit] event.
//
// # Two-way control
//
// A run with Request.Approve or Request.MCPServers runs as a session of
// one turn (see the session comment in session.go), in ACP.
//
// Approvals are Gemini's session/request_permission requests. With a
// callback the session stays in Gemini's "default" mode at every
// permission level (never autoEdit or yolo, which ask less), so Gemini asks
// before each shell command ("command", with the command line), each edit
// ("file_change", with its paths), each MCP tool call ("mcp_tool", with the
// arguments as input; the tool is named mcp_SERVER_TOOL) and each fetch
// ("tool"). The permission level stays the ceiling: a request above it
// (a command under WorkspaceWrite, an edit under ReadOnly, an edit of a
// file outside the working directory under WorkspaceWrite) is rejected
// without asking (see docs/approvals.md). Allow answers Gemini's "proceed_once", ForSession its
// "proceed_always" (the same command or tool for the session, never the
// option that saves the approval in the user's settings), except for an
// edit below Unlimited: Gemini would take "proceed_always" for a switch
// of the session to autoEdit, where no later edit is asked, so the edit
// is answered "proceed_once" and the session keeps the grant, allowing a
// later edit of the same tool once it is judged, without asking the
// program again. A denial answers its "cancel": Gemini then tells the
// model `Tool "NAME" was canceled by the user.` — ACP carries no message,
// so Decision.Message does not reach the model, and a Decision with Input
// is a denial (Gemini takes no changed input). A turn cancelled while the callback decides answers the
// question "cancelled" and ends with the context's error.
//
// MCP servers go to Gemini with session/new, over standard input: a
// Command server as a stdio server (Gemini starts it with its own
// environment and Env, in Workdir, so it runs inside the run's
// containment; Gemini refuses stdio servers in a folder it does not
// trust), a URL server as a streamable HTTP server with its Headers; Go
// servers are served by the run on 127.0.0.1 and given as URL servers
// whose bearer token travels in such a header, never on the command line.
// The model calls a tool TOOL of server SERVER as mcp_SERVER_TOOL. The
// request's servers are trusted at every level: without a callback their
// tools run without asking (Gemini's question is answered for the whole
// server), with one the question goes to the callback.
//
// # What Gemini cannot do
//
// Capabilities.Steer and Capabilities.Fork are false. ACP has no request
// that adds a message to a turn in progress, and Gemini's ACP agent takes
// one session/prompt at a time (a second cancels the first). Nothing in
// Gemini CLI 0.61.0 copies a conversation: its ACP agent answers
// session/fork with "method not found" (the protocol's
// unstable_forkSession is not implemented), and its command line has
// --resume, which continues a session, but no fork. Session.Steer and
// Request.Fork return an error matching [invoker.ErrUnsupported] before
// anything starts.
package gemini

import (
	"fmt"
	"os"
	"unicode/utf16"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// New returns an Invoker that runs the gemini CLI. With no options the
// binary is found on PATH as "gemini".
func New(opts ...invoker.Options) invoker.Invoker { return driver.New(backend{}, opts...) }

// backend adapts the Gemini CLI to the invoker engine. It has no state.
type backend struct{}

var _ driver.Backend = backend{}

func (backend) Name() string        { return "gemini" }
func (backend) Binary() string      { return "gemini" }
func (backend) InstallHint() string { return "npm install -g @google/gemini-cli" }

func (backend) NewDecoder(*invoker.Request) driver.Decoder { return newDecoder() }

// Capabilities: gemini has no image flag, and reads a system prompt only
// from a file named in its environment. Both of its modes stream the
// answer in chunks; ACP switches a session's mode and model, asks for
// permission, and takes MCP servers with session/new (measured with 0.61.0
// in e2e's live and two-way scenarios). Neither ACP nor Gemini's own
// commands can add to a turn in progress or copy a conversation.
func (backend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Deltas: true,
		SwitchModel: true, SwitchPermission: true, Approve: true, GoTools: true, MCPServers: true}
}

// Hint says what to do instead of the fields gemini lacks.
func (backend) Hint(field string) string {
	switch field {
	case "Images":
		return "gemini has no image flag; reference each file in the prompt as @path (inside the workdir or a directory added with --include-directories)"
	case "SystemPrompt":
		return "gemini reads a system prompt only from a file: write it and set GEMINI_SYSTEM_MD=/path/to/file.md in Request.Env (it replaces gemini's built-in prompt)"
	case "OutputSchema":
		return "gemini has no output-schema flag; describe the JSON shape in the prompt and check the answer yourself"
	case "MaxTurns":
		return "gemini takes a turn limit only from its settings file (model.maxSessionTurns in settings.json under GEMINI_CLI_HOME); a turn stopped by it is reported as an *invoker.LimitError"
	case "MaxBudgetUSD":
		return "gemini has no budget limit and reports no cost; bound the run with a deadline on the context instead"
	case "Steer":
		return "gemini's ACP mode takes a prompt only as a turn of its own (session/prompt); cancel the turn and send the message as the next one"
	case "Fork":
		return "gemini 0.61.0 cannot copy a conversation (its ACP agent has no session/fork, its CLI no fork flag); resume the session with Request.SessionID instead, which continues it"
	}
	return ""
}

// maxStdin is how much of stdin Gemini reads, in UTF-16 code units
// (readStdin in packages/cli: MAX_STDIN_SIZE, measured on decoded strings).
const maxStdin = 8 << 20

// approvalMode returns Gemini's approval mode for a permission level.
func approvalMode(p invoker.Permission) (string, error) {
	switch p {
	case "", invoker.ReadOnly:
		return "default", nil
	case invoker.WorkspaceWrite:
		return "auto_edit", nil
	case invoker.Unlimited:
		return "yolo", nil
	}
	return "", fmt.Errorf("%w: unknown permission %q", invoker.ErrInvalidRequest, string(p))
}

func (backend) Command(req *invoker.Request) (*driver.Command, error) {
	mode, err := approvalMode(req.Permission)
	if err != nil {
		return nil, err
	}
	if n := utf16Len(req.Prompt); n > maxStdin {
		return nil, fmt.Errorf("%w: the prompt is %d UTF-16 code units long; gemini reads at most %d from stdin and would silently cut it", invoker.ErrInvalidRequest, n, maxStdin)
	}
	args := []string{"--output-format=stream-json", "--approval-mode=" + mode}
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	if req.SessionID != "" {
		args = append(args, "--resume="+req.SessionID)
	}
	// The policy file is written last, once nothing can fail, so that an
	// error never leaves it behind; Cleanup removes it after the run.
	var cleanup func()
	if mode == "auto_edit" {
		policy, err := writePolicy()
		if err != nil {
			return nil, err
		}
		args = append(args, "--admin-policy="+policy)
		cleanup = func() { os.Remove(policy) }
	}
	args = append(args, req.ExtraArgs...)
	// Last, so that no ExtraArgs option can take it as its value.
	args = append(args, "--prompt=")
	return &driver.Command{Args: args, Stdin: req.Prompt, Cleanup: cleanup}, nil
}

// utf16Len returns the length of s in UTF-16 code units, or len(s) when
// that is already within maxStdin (a string never has more code units than
// bytes).
func utf16Len(s string) int {
	if len(s) <= maxStdin {
		return len(s)
	}
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
