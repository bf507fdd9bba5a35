package fakeagent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by Main. Script.Env sets them; a test never
// needs to set them by hand.
const (
	// EnvScript holds the Script as JSON. Main runs the fake agent when it
	// is set (an empty value runs the zero Script).
	EnvScript = "CLINVOKE_FAKEAGENT"
	// EnvTag holds Script.Tag. Every process of the fake's tree inherits
	// it, so Survivors can find them in /proc/<pid>/environ.
	EnvTag = "CLINVOKE_FAKEAGENT_TAG"
	// EnvOwner identifies the process that called Script.Env (pid and
	// start time), so Orphans sees only the fakes of its own test binary.
	EnvOwner = "CLINVOKE_FAKEAGENT_OWNER"

	// envRole selects a helper role (sleeper, holder, escapee, escaped)
	// for the processes the fake starts; empty means the agent itself.
	envRole = "CLINVOKE_FAKEAGENT_ROLE"
	// envReady names the file descriptor a helper closes once it has
	// recorded its pid (see spawn.go).
	envReady = "CLINVOKE_FAKEAGENT_READY"
	// envTurn holds the number of the session turn that started a helper
	// (TurnSpawns), for its record.
	envTurn = "CLINVOKE_FAKEAGENT_TURN"
	// envLifeline holds EnvOwner's value for a helper whose environment was
	// cleared (no EnvOwner, so Orphans cannot see it): it ends when that
	// process does.
	envLifeline = "CLINVOKE_FAKEAGENT_LIFELINE"
)

// Flavours of Script.Flavor.
const (
	Codex  = "codex"
	Gemini = "gemini"
	Claude = "claude"
	// ACP is an agent of the Agent Client Protocol other than Gemini CLI,
	// as invoker/acp runs one: it speaks the protocol whatever its
	// arguments (see ACPOptions).
	ACP = "acp"
)

// DefaultAnswer is the final answer of a Script without Answer.
const DefaultAnswer = "Hello from the fake agent."

// DefaultInterval is the pause between paced events when Script.Interval
// is zero.
const DefaultInterval = 20 * time.Millisecond

// sleepFor is how long helper processes (grandchildren, escapees, stdout
// holders) sleep. They never clean themselves up early: killing them is the
// library's job, which is what the tests prove. They do not outlive the
// process that made their script, though (see sleepOwned): a helper the
// library could not find (an env -i daemon at the tracking level) or a test
// binary that died before its checks must not leave a user's machine
// running them for minutes.
const sleepFor = 10 * time.Minute

// A Script tells the fake agent what to do. The zero value reads standard
// input to EOF and answers DefaultAnswer at once in Codex's format, like
// `codex exec --json` with a prompt on stdin.
//
// The fake prints, in this order (each part only when asked for):
//
//	Stderr, then standard input is read to EOF (unless SkipStdin),
//	helper processes are started (Grandchild, Escapee, HoldStdout),
//	SilentFor passes,
//	the session events (codex thread.started + turn.started; gemini init +
//	the user echo; claude system init),
//	Malformed lines, the Tool call and its result, progress events for
//	StreamFor, the HugeLine, the answer in Chunks, StallFor passes,
//	the terminal event (success, or Fail) unless NoTerminal,
//	the ExitGate and TouchAtExit,
//
// and exits with ExitCode. Every line is written with one write call.
type Script struct {
	// Flavor selects the CLI whose JSONL shapes are printed: Codex
	// (default), Gemini or Claude. Field names, nesting and order are
	// copied from captures of the real CLIs (docs/cli-facts.md).
	Flavor string `json:"flavor,omitempty"`

	// SessionID is the session (thread) id reported. If empty, a resumed
	// id found in the arguments is reported (codex `resume ID`, gemini
	// `-r ID`/`--resume ID`, claude `--resume=ID`/`-r ID`), else a fresh
	// UUID in the CLI's format (v7 for Codex, v4 for the others).
	SessionID string `json:"session_id,omitempty"`

	// Answer is the final answer (default DefaultAnswer).
	Answer string `json:"answer,omitempty"`

	// Answers are, in a session, the answers of its turns in order; a
	// turn past their end answers Answer, or "Turn N: " and DefaultAnswer.
	Answers []string `json:"answers,omitempty"`

	// AnswerSize, if larger than the answer, pads the answer at its end
	// with ASCII filler to this many bytes: an answer whose lines exceed a
	// line limit (set with invoker.Options.MaxLineSize).
	AnswerSize int `json:"answer_size,omitempty"`

	// Chunks splits the answer into this many message events (default 1,
	// at most one per rune), Interval apart, keeping each CLI's rule for
	// the final answer: Gemini prints assistant deltas whose concatenation
	// is the answer; Claude prints one text block per assistant event
	// (sharing message.id) and puts the whole answer in result.result;
	// Codex prints agent_message items holding growing prefixes of the
	// answer, the last one (the final answer) holding all of it.
	Chunks int `json:"chunks,omitempty"`

	// Tool adds a shell tool call and its result ("echo hello" → "hello")
	// before the answer: codex command_execution item.started and
	// item.completed; gemini tool_use and tool_result run_shell_command;
	// claude assistant tool_use Bash and user tool_result.
	Tool bool `json:"tool,omitempty"`
	// Touch names paths the fake itself tries, before its first event, to
	// write ("write PATH": append a line, creating the file) or to read
	// ("read PATH"; "content PATH" fails with "empty" where the file read
	// holds nothing), to remove ("remove PATH") or to replace by a rename
	// over it ("replace PATH": write PATH.new, rename it to PATH), or to
	// make a directory with its parents ("mkdir PATH"), as a
	// CLI under a sandbox would; "$TMPDIR" in PATH is
	// the fake's TMPDIR. Each outcome is a line of the answer, after it:
	// "write PATH: ok", or the error ("… permission denied"). "get URL"
	// asks for URL over HTTP as most clients do, through the proxy that
	// HTTP_PROXY and HTTPS_PROXY name unless NO_PROXY says otherwise
	// (outcome "ok", or the status: "403 Forbidden"); "proxy URL" asks
	// through the proxy HTTP_PROXY names, whatever NO_PROXY says, as
	// curl -x does; "dial HOST:PORT"
	// connects over TCP, ignoring any proxy ("ok", or the error); "udp
	// HOST:PORT" sends a datagram from a connected UDP socket and reads
	// the answer ("ok" for one, or the error: "… connection refused").
	Touch []string `json:"touch,omitempty"`
	// TouchAtExit names what the fake tries, as Touch does, after its
	// terminal event and before it exits, as a CLI that reports to its
	// vendor at exit does (in a Claude session: with ExitGate, after each
	// turn's terminal event; without, at the end of its input); each
	// outcome is a line on standard error.
	TouchAtExit []string `json:"touch_at_exit,omitempty"`
	// ExitGate, if set, is the path of the FIFOs NewExitGate made: after
	// its terminal event the fake waits until the test opens the gate,
	// does TouchAtExit, and then tells the test it has.
	ExitGate string `json:"exit_gate,omitempty"`

	// StreamFor keeps printing progress events, one every Interval, for
	// this long before the answer: codex reasoning items, claude thinking
	// blocks, gemini tool_use/tool_result pairs (list_directory). Progress
	// events never change the final answer.
	StreamFor time.Duration `json:"stream_for,omitempty"`

	// Interval paces progress events, answer chunks and Replay lines
	// (default DefaultInterval).
	Interval time.Duration `json:"interval,omitempty"`

	// SilentFor makes the fake print nothing at all on stdout for this long
	// before its first event (standard input is read before).
	SilentFor time.Duration `json:"silent_for,omitempty"`

	// StallFor makes the fake print nothing for this long after the answer
	// and before the terminal event: a model stream that stalls mid-turn.
	// With a long StallFor a cancelled run has a session id and partial
	// text but no terminal event.
	StallFor time.Duration `json:"stall_for,omitempty"`

	// IgnoreSignals makes the fake and its helper processes ignore SIGINT
	// and SIGTERM: only SIGKILL stops them.
	//
	// Without it, SIGINT and SIGTERM end the fake the way they end the
	// real CLI of its flavour (docs/cli-facts.md, "Success, failure, exit
	// codes"): Codex exits 1 on SIGINT and 143 on SIGTERM, with no
	// terminal event; Claude prints result{subtype:"error_during_execution",
	// is_error:true} and exits 0 on SIGINT, and exits 143 with no result on
	// SIGTERM; Gemini exits 0 with no result. The status 143 is an exit
	// status, not a death by signal. In no case does the fake stop the
	// processes it started: that is the library's job. Helper processes
	// die of SIGINT and SIGTERM like `sleep` does.
	IgnoreSignals bool `json:"ignore_signals,omitempty"`

	// SigIgn names signals ("SIGINT", "SIGTERM") whose disposition the
	// fake sets to SIG_IGN before anything else, as a CLI started by a
	// host that ignores them inherits it (nohup, a shell script's
	// background command): the kernel discards them, and no handler of
	// the fake's sees them, unlike IgnoreSignals, which catches them.
	// /proc/PID/status shows them in SigIgn. (Unix.)
	SigIgn []string `json:"sig_ign,omitempty"`

	// Grandchild starts a helper process in the fake's process group that
	// sleeps for ten minutes, with standard streams on the null device.
	Grandchild bool `json:"grandchild,omitempty"`

	// GrandchildTraps makes the Grandchild helper catch SIGINT and
	// SIGTERM, whatever dispositions it inherited, as a tool that installs
	// its own handlers does: it records each one it catches
	// (Record.Signals), and exits once it has caught SIGINT. The fake, when
	// a signal ends it, waits for the helper first, so that the record is
	// complete once the fake has exited. (Unix.)
	GrandchildTraps bool `json:"grandchild_traps,omitempty"`

	// Escapee starts a helper that calls setsid (a new session and process
	// group) and starts a child of its own, then exits, so that the child
	// is orphaned and re-parented to init (or to a child subreaper). The
	// orphan sleeps for ten minutes. It inherits the environment, so a
	// per-run marker variable set by the library finds it. (Unix; on other
	// systems it is started detached in a new process group.)
	Escapee bool `json:"escapee,omitempty"`

	// ClearedEscapee starts, with the other helpers, a daemon as `setsid
	// -f env -i CMD` leaves it: started by a helper that exits at once
	// ("turn-envi-start"), in a session of its own, its environment
	// cleared of everything but what it needs to run and record itself
	// ("turn-envi-daemon", Proc.Turn 0), so that neither Survivors nor a
	// marker finds it; only the record does. It sleeps for ten minutes.
	// (Unix.)
	ClearedEscapee bool `json:"cleared_escapee,omitempty"`

	// HoldStdout starts a helper that inherits the fake's stdout and stderr
	// and sleeps for ten minutes; the fake itself exits as usual after the
	// stream, so its pipes stay open after it exited.
	HoldStdout bool `json:"hold_stdout,omitempty"`

	// HugeLine, if positive, prints before the answer one valid event line
	// of exactly HugeLine bytes without its newline (or the smallest such
	// event, when HugeLine is smaller): a tool result whose output is
	// ASCII filler (codex command_execution aggregated_output; gemini
	// tool_result output; claude tool_result content and tool_use_result
	// stdout sharing the filler), after its tool call.
	HugeLine int `json:"huge_line,omitempty"`

	// Malformed prints, after the session events, a truncated JSON line, a
	// line that is not JSON, an empty line, a line of invalid UTF-8 bytes
	// and a well-formed event of an unknown type.
	Malformed bool `json:"malformed,omitempty"`

	// ExitCode is the exit status after the stream. If zero and Fail is
	// set, the flavour's failure status is used: 1 for Codex and Claude,
	// 0 for Gemini (which exits 0 when its stream ends badly; set ExitCode
	// to model its HTTP-status exits such as 244).
	ExitCode int `json:"exit_code,omitempty"`

	// Stderr is written to standard error first, before standard input is
	// read (like Codex's "Reading additional input from stdin..."), so a
	// stall signature can be seen while the fake waits.
	Stderr string `json:"stderr,omitempty"`

	// Fail replaces the answer and the success terminal event by a failure
	// with this message in the flavour's shape: codex error +
	// turn.failed{error{message}}; claude a synthetic assistant text and
	// result{subtype:"success", is_error:true, result:Fail}; gemini
	// result{status:"error", error{type, message}}.
	Fail string `json:"fail,omitempty"`

	// NoTerminal leaves out the terminal event (codex turn.completed or
	// turn.failed, gemini and claude result). In a session (see
	// "Sessions" in the package documentation) the first turn leaves out
	// its end (Claude Code's result, the app-server's turn/completed, the
	// response to ACP's session/prompt), and the fake exits there with
	// ExitCode, as a CLI that dies mid-turn.
	NoTerminal bool `json:"no_terminal,omitempty"`

	// SkipStdin makes the fake never read (nor close) standard input.
	// By default it reads standard input to EOF before anything else,
	// like the real CLIs do with a piped prompt: a stdin that is never
	// closed hangs it, as it hangs Codex.
	SkipStdin bool `json:"skip_stdin,omitempty"`

	// Replay, if set, is the path of a captured .stdout file printed line
	// by line, Interval apart, instead of the generated events. Flavor
	// still decides the signal behaviour; Stderr, helpers, SilentFor and
	// ExitCode still apply. Env makes the path absolute.
	Replay string `json:"replay,omitempty"`

	// Transcript, if set, is a file to which a session (see "Sessions" in
	// the package documentation) appends every line of its input, as it
	// reads it. Env makes the path absolute.
	Transcript string `json:"transcript,omitempty"`

	// RecordDir, if set, is an existing directory where the fake records
	// what it saw, for ReadRecord: its arguments, working directory,
	// environment and standard input, and one line per process of its tree
	// (the fake and each helper, each appending its own line). Use a fresh
	// directory per run. Env makes the path absolute.
	RecordDir string `json:"record_dir,omitempty"`

	// IgnoreInterrupt makes the fake, in a session (see "Sessions" in the
	// package documentation), neither answer nor obey an interrupt
	// request: the turn runs on as scripted.
	IgnoreInterrupt bool `json:"ignore_interrupt,omitempty"`

	// IgnoreEOF makes a session (see "Sessions" in the package
	// documentation) go on running at the end of its input, until a
	// signal ends it, as a wedged CLI does.
	IgnoreEOF bool `json:"ignore_eof,omitempty"`
	// RefuseModeSwitch makes Claude Code's fake refuse every
	// set_permission_mode control request, as Claude Code refuses a mode
	// it does not allow.
	RefuseModeSwitch bool `json:"refuse_mode_switch,omitempty"`

	// SessionHelper makes a session (see "Sessions" in the package
	// documentation) start, before its first turn, a helper process that
	// it keeps and uses on every turn, as a CLI keeps an MCP server: a
	// child in the fake's process group (Proc.Role "session-helper") to
	// which each turn, before its first event, writes a line on its stdin
	// and whose answer it reads. If the helper does not answer (it was
	// killed), the fake writes "fakeagent: the session helper is gone" to
	// standard error and exits with status 4, so that a session whose
	// helper a library killed fails its next turn. The helper sleeps for
	// ten minutes once its stdin ends.
	SessionHelper bool `json:"session_helper,omitempty"`

	// TurnSpawns makes every turn of a session start, before the turn's
	// first event, three processes that sleep for ten minutes, as a
	// turn's tools that outlive it: a grandchild in the fake's process
	// group ("turn-grandchild"), a daemon in a session of its own, orphaned
	// by the process that started it and exited at once, as `setsid -f
	// CMD` leaves it ("turn-daemon", started by "turn-daemon-start"), and
	// the same with an environment cleared of everything but what the
	// helper needs to run and record itself, as `setsid -f env -i CMD`
	// leaves it ("turn-envi-daemon", started by "turn-envi-start"): no
	// Tag, no EnvOwner and no variable a library set, so that neither
	// Survivors nor Orphans nor a marker finds it; only the record does.
	// Each is recorded with the turn's number (Proc.Turn) before the turn's
	// first event.
	TurnSpawns bool `json:"turn_spawns,omitempty"`

	// Ask makes every turn of a session (see "Two-way control" in the
	// package documentation) ask its client for permission to run this
	// shell command before its answer, in the CLI's own protocol: Claude
	// Code's can_use_tool control request (with --permission-prompt-tool
	// stdio; else its flags decide), Codex's
	// item/commandExecution/requestApproval (unless the approval policy is
	// never), ACP's session/request_permission (unless the mode is yolo).
	// Allowed, the command runs with sh -c in the working directory (a
	// changed input runs the changed command) and its call and result are
	// reported; denied, the denial is. The turn's answer states the
	// outcome (OutcomeApproved, or OutcomeDenied and the client's message).
	// An allow for the session is remembered: later turns run the command
	// without asking. Outside a session, Ask is ignored.
	Ask string `json:"ask,omitempty"`

	// AskCount, above 1, makes Ask's question that many questions at once,
	// as the parallel tool calls of one model response: each is its own
	// tool call, all are asked before any answer is awaited, and the
	// answer has one outcome line for each, in order.
	AskCount int `json:"ask_count,omitempty"`

	// Edit makes every turn of a session ask its client for permission
	// to write this file (a path relative to the working directory, or
	// absolute), after Ask, in the CLI's own protocol for a file change:
	// Claude Code's can_use_tool control request for its Write tool
	// (input file_path, absolute, and content; suggesting the mode
	// acceptEdits for the session), Codex's fileChange item (item/started,
	// the change's path and kind add or update, with its diff) followed by
	// item/fileChange/requestApproval (unless the approval policy is
	// never), ACP's session/request_permission for Gemini CLI's
	// write_file (a tool call of kind edit titled "Writing to FILE", the
	// file in its locations and a diff in its content; unless the mode is
	// yolo or autoEdit). Allowed, the fake writes EditContent into the
	// file (Claude Code: the file_path and content of a changed input),
	// creating it and its directory if need be, and reports the change;
	// denied, it leaves the file alone and reports the denial. The turn's
	// answer states the outcome: OutcomeEdited (OutcomeEditFailed when the
	// write failed), or OutcomeDenied and the client's message. An allow
	// for the session is remembered as the CLI remembers it: by Claude
	// Code for the Write tool (a rule, or the mode acceptEdits, for the
	// files in the working directory), by Codex for the same file, by
	// Gemini CLI for every edit; later turns write without asking.
	// Outside a session, Edit is ignored.
	Edit string `json:"edit,omitempty"`

	// CallTool makes every turn of a session call the tool of an MCP
	// server its client configured, named "server/tool", with ToolArgs
	// (a JSON object), after Ask and Edit and before the answer: for Claude Code
	// over its control protocol for a server of type sdk in --mcp-config
	// (initialize, notifications/initialized, tools/list, tools/call as
	// mcp_message requests), else, for every CLI, as an MCP client of the
	// server's URL (streamable HTTP, with the headers configured) or
	// command (stdio), configured as the CLI takes it: Claude Code's
	// --mcp-config, Codex's mcp_servers tables in -c options and in
	// thread/start's config (bearer_token_env_var, env_http_headers and
	// http_headers give the headers; env_vars a command's environment),
	// ACP's session/new mcpServers. A Claude Code tool that its flags do
	// not allow is asked about as Ask's command is; so is a Gemini one
	// outside yolo mode, and a Codex one whose server's
	// default_tools_approval_mode is not "approve" (with an
	// mcpServer/elicitation/request marked mcp_tool_call; under the
	// approval policy never the call fails instead). The turn's
	// answer holds the tool's result text (OutcomeToolError before an
	// error result, OutcomeToolFailed when there was none). An
	// interrupted turn cancels the call. Outside a session, CallTool is
	// ignored.
	CallTool string `json:"call_tool,omitempty"`

	// AskLate makes a Codex session, when its client asks for
	// thread/backgroundTerminals/clean after a turn, ask approval to run
	// this shell command for the turn that completed
	// (item/commandExecution/requestApproval, unless the approval policy
	// is never) before it answers, and run it if accepted: a question
	// that comes after turn/completed, which a client should refuse. The
	// other flavours ignore it.
	AskLate string `json:"ask_late,omitempty"`

	// CommandCallsTool makes a Codex session's turn, after its own call
	// of CallTool's tool, run a command that makes the same call: a child
	// in a session of its own, as the CLIs run their commands, connecting
	// to the server's URL with the headers the fake was configured with
	// (a command that found the bearer token). The turn's answer then
	// ends with a line "command: " and the command's outcome: the tool's
	// text, or OutcomeToolFailed and the error.
	CommandCallsTool bool `json:"command_calls_tool,omitempty"`
	// CommandViaProxy makes CommandCallsTool's command send its call
	// through the proxy its HTTP_PROXY names, loopback URL included (a
	// command that tries the sandbox's proxy to reach the endpoint).
	CommandViaProxy bool `json:"command_via_proxy,omitempty"`
	// CommandRelay, if not empty, makes CommandCallsTool's command send
	// its call through a relay on the host at this host:port, reached
	// through a tunnel of the proxy its HTTP_PROXY names (CONNECT): on
	// the tunnel it writes the server's host:port and a newline, then
	// speaks HTTP to the server (a command that found a server the run
	// may reach which relays connections).
	CommandRelay string `json:"command_relay,omitempty"`

	// ToolArgs are the arguments of CallTool's call, a JSON object.
	ToolArgs json.RawMessage `json:"tool_args,omitempty"`

	// Tag, if set, is placed in the environment (EnvTag) of the fake and
	// all its descendants, so that Survivors(Tag) finds any that are left.
	// Use a value unique to the run, such as one from NewTag.
	Tag string `json:"tag,omitempty"`

	// Load makes the Tool call (or, with Load.InCLI, the fake itself)
	// use memory, processes or CPU (see Load).
	Load Load `json:"load,omitzero"`

	// RateLimitedUntil, with Fail, makes the Claude flavour fail the turn
	// as rate limited until that time: a rate_limit_event whose limit is
	// rejected and resets then (resetsAt, in Unix seconds), and a result
	// with is_error and api_error_status 429 whose text is Fail. The other
	// flavours ignore it.
	RateLimitedUntil time.Time `json:"rate_limited_until,omitzero"`

	// ACP is what an agent of the Agent Client Protocol does beyond the
	// rest of the Script: the ACP flavour, and the Gemini flavour with
	// --acp.
	ACP ACPOptions `json:"acp,omitzero"`
}

// Env returns the KEY=VALUE entries that make a binary calling Main run s.
// Pass them as invoker.Request.Env, with invoker.Options.Env, or append them
// to exec.Cmd.Env. They also name the calling process as the owner of the
// fake (see Orphans), make RecordDir and Replay absolute, and add
// atexit_sleep_ms=0 to GORACE so that a fake built with -race exits at
// once.
func (s Script) Env() []string {
	if s.RecordDir != "" {
		if abs, err := filepath.Abs(s.RecordDir); err == nil {
			s.RecordDir = abs
		}
	}
	if s.Replay != "" {
		if abs, err := filepath.Abs(s.Replay); err == nil {
			s.Replay = abs
		}
	}
	if s.Transcript != "" {
		if abs, err := filepath.Abs(s.Transcript); err == nil {
			s.Transcript = abs
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic("fakeagent: " + err.Error()) // cannot happen: plain fields
	}
	env := []string{
		EnvScript + "=" + string(b),
		EnvOwner + "=" + ownerID(),
		envRole + "=", // a fake started by a helper is an agent again
		envTurn + "=",
	}
	if s.Tag != "" {
		env = append(env, EnvTag+"="+s.Tag)
	}
	// A binary built with -race sleeps 1 s at exit (the race runtime's
	// atexit_sleep_ms) unless told otherwise: without this, every fake
	// agent run by a -race test would take a second longer.
	if gorace := os.Getenv("GORACE"); !strings.Contains(gorace, "atexit_sleep_ms") {
		env = append(env, strings.TrimSpace("GORACE="+gorace+" atexit_sleep_ms=0"))
	}
	return env
}

// NewTag returns a random tag for Script.Tag, unique across test binaries
// running at the same time.
func NewTag() string {
	var b [8]byte
	rand.Read(b[:])
	return "fa-" + hex.EncodeToString(b[:])
}

// ownerID identifies this process: its pid and, on Linux, its start time,
// so that a later process reusing the pid is not mistaken for the owner.
func ownerID() string {
	pid := os.Getpid()
	if st, ok := startTime(pid); ok {
		return strconv.Itoa(pid) + "." + strconv.FormatUint(st, 10)
	}
	return strconv.Itoa(pid)
}

// Main runs the fake agent, or one of the helper processes it starts, and
// exits the process, when the environment asks for it (EnvScript is set,
// as by Script.Env); otherwise it returns at once. Call it first in
// TestMain (or main), before flags are parsed: the fake gets the CLI's
// arguments, not the test binary's.
func Main() {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runHelper(role))
	}
	v, ok := os.LookupEnv(EnvScript)
	if !ok {
		if startedAsCLI() {
			// A test started this binary as an agent CLI but gave it
			// no script: running the tests here would start the same
			// sessions again, and again.
			fmt.Fprintf(os.Stderr, "fakeagent: started as an agent CLI (%q) without %s in the environment\n", os.Args[1], EnvScript)
			os.Exit(2)
		}
		return
	}
	s, err := parseScript(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(2)
	}
	os.Exit(run(s))
}

func parseScript(v string) (Script, error) {
	var s Script
	if v == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return s, fmt.Errorf("bad %s: %w", EnvScript, err)
	}
	switch s.Flavor {
	case "", Codex, Gemini, Claude, ACP:
	default:
		return s, fmt.Errorf("unknown flavor %q", s.Flavor)
	}
	return s, nil
}

func (s *Script) flavor() string {
	if s.Flavor == "" {
		return Codex
	}
	return s.Flavor
}

// turnAnswer is the answer of the nth turn of a session (from 1), padded
// to AnswerSize.
func (s *Script) turnAnswer(n int) string {
	switch {
	case n <= len(s.Answers):
		return s.Answers[n-1]
	case s.Answer != "":
		return s.answer()
	}
	return fmt.Sprintf("Turn %d: %s", n, DefaultAnswer)
}

func (s *Script) interval() time.Duration {
	if s.Interval <= 0 {
		return DefaultInterval
	}
	return s.Interval
}

func (s *Script) answer() string {
	a := s.Answer
	if a == "" {
		a = DefaultAnswer
	}
	if pad := s.AnswerSize - len(a); pad > 0 {
		a += strings.Repeat(".", pad)
	}
	return a
}

// startedAsCLI reports whether the arguments are an agent CLI's rather
// than a test binary's: a subcommand (codex exec, codex app-server) or a
// long flag (claude --print, gemini --output-format, gemini --acp). Test
// binaries get -test.* flags and the tests' own single-dash flags.
func startedAsCLI() bool {
	if len(os.Args) < 2 {
		return false
	}
	a := os.Args[1]
	return a == "exec" || a == "app-server" || (strings.HasPrefix(a, "--") && !strings.HasPrefix(a, "--test."))
}

// touch does what Touch asks and adds each outcome to the answer.
func (s *Script) touch() {
	if len(s.Touch) == 0 {
		return
	}
	s.Answer = strings.Join(append([]string{s.answer()}, touchAll(s.Touch)...), "\n")
}

// touchAtExit does what TouchAtExit asks and writes each outcome to
// standard error, after the ExitGate if there is one.
func (s *Script) touchAtExit() {
	gate := s.ExitGate != ""
	if gate {
		if err := readFIFO(s.ExitGate); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: the exit gate:", err)
		}
	}
	for _, l := range touchAll(s.TouchAtExit) {
		fmt.Fprintln(os.Stderr, l)
	}
	if gate {
		if err := writeFIFO(s.ExitGate + ".passed"); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: the exit gate:", err)
		}
	}
}

// touchAll does each operation of Touch's ops and returns their outcomes,
// one line each.
func touchAll(ops []string) []string {
	var lines []string
	for _, t := range ops {
		op, path, _ := strings.Cut(t, " ")
		path = strings.ReplaceAll(path, "$TMPDIR", os.Getenv("TMPDIR"))
		var err error
		switch op {
		case "write":
			var f *os.File
			if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				_, err = f.WriteString("touched\n")
				f.Close()
			}
		case "read":
			_, err = os.ReadFile(path)
		case "content":
			// A read that finds nothing (a file masked by an empty one)
			// is not one that read the file.
			var b []byte
			if b, err = os.ReadFile(path); err == nil && len(b) == 0 {
				err = errors.New("empty")
			}
		case "mkdir":
			err = os.MkdirAll(path, 0o755)
		case "remove":
			err = os.Remove(path)
		case "replace":
			if err = os.WriteFile(path+".new", []byte("replaced\n"), 0o644); err == nil {
				if err = os.Rename(path+".new", path); err != nil {
					os.Remove(path + ".new")
				}
			}
		case "get":
			err = httpGet(path, http.ProxyFromEnvironment)
		case "proxy":
			err = httpGet(path, func(*http.Request) (*url.URL, error) { return url.Parse(os.Getenv("HTTP_PROXY")) })
		case "dial":
			var c net.Conn
			if c, err = net.DialTimeout("tcp", path, 10*time.Second); err == nil {
				c.Close()
			}
		case "udp":
			err = udpSend(path)
		default:
			err = fmt.Errorf("unknown operation %q", op)
		}
		res := "ok"
		if err != nil {
			res = err.Error()
		}
		lines = append(lines, op+" "+path+": "+res)
	}
	return lines
}

// udpSend sends a datagram to addr as Touch's "udp" does and reads the
// answer: nil for one, else the error.
func udpSend(addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [16]byte
	_, err = c.Read(b[:])
	return err
}

// httpGet asks for u as Touch's "get" does, on a connection of its own
// that it closes: nil for 200 OK, else the error or the status.
func httpGet(u string, proxy func(*http.Request) (*url.URL, error)) error {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: proxy, DisableKeepAlives: true}}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// readFIFO opens path and reads it to its end: a FIFO there blocks until
// its writer has opened and closed it.
func readFIFO(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// writeFIFO opens path for writing and closes it: a FIFO there blocks
// until its reader has opened it.
func writeFIFO(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
}
