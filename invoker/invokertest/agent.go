package invokertest

import (
	"os"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// An Agent is a scripted stand-in for one of the agent CLIs — Codex, Gemini
// CLI or Claude Code — for tests of code that runs them, as
// net/http/httptest's Server stands in for a web server. The real backends
// run it exactly as they run the CLI: its output is the CLI's own event
// stream (copied from captures of the real CLIs), it answers sessions in
// the CLI's protocol, and it misbehaves on demand. Nothing needs to be
// installed, and nothing reaches the network.
//
// The agent is the test binary itself, started again: the package's tests
// must call Main from TestMain. Pass an Agent's Options to the backend's
// New:
//
//	func TestMain(m *testing.M) { invokertest.Main(m) }
//
//	func TestSummary(t *testing.T) {
//		inv := claude.New(invokertest.Agent{CLI: "claude", Answer: "All good."}.Options())
//		res, err := inv.Invoke(ctx, invoker.Request{Prompt: "Summarize", Workdir: t.TempDir()})
//		...
//	}
//
// In order, a turn of the agent prints: after Silence, its session (with
// SessionID), the Tool call and its result, progress for Progress, the
// Answer in Chunks, and after Stall the CLI's terminal event (or the
// failure Fail), then exits with ExitCode. The zero Agent speaks Codex and
// answers at once.
type Agent struct {
	// CLI is the CLI whose output the agent prints: "codex" (the
	// default), "gemini" or "claude". Use it with that CLI's backend.
	CLI string

	// SessionID is the session (thread) id the agent reports; empty means
	// the id it was asked to resume, or a fresh one.
	SessionID string

	// Answer is the final answer; empty means a fixed sentence.
	Answer string

	// Answers are the answers of a session's turns, in order; a turn past
	// their end answers Answer (or "Turn N: ..." when Answer is empty).
	Answers []string

	// Chunks streams the answer as this many message events, 10 ms
	// apart: deltas for CLIs that stream text, growing messages for
	// Codex, the answer's text blocks for Claude Code.
	Chunks int

	// Tool makes the agent call a shell tool (echo hello) and report its
	// result before it answers.
	Tool bool

	// Progress makes the agent print progress (reasoning, thinking,
	// directory listings) every 10 ms for this long before the answer.
	Progress time.Duration

	// Silence makes the agent print nothing for this long before its first
	// event: a CLI that starts slowly, or hangs.
	Silence time.Duration

	// AnswerSize, when larger than the answer, pads the answer with ASCII
	// filler to this many bytes: an answer on a line over a line limit.
	AnswerSize int

	// HugeLine prints, before the answer, a tool's result on one line of
	// about this many bytes.
	HugeLine int

	// Stall makes the agent print nothing for this long after the answer
	// and before its terminal event: a model stream that stalls mid-turn.
	Stall time.Duration

	// Fail makes the turn fail with this message, the way the CLI reports
	// a model error (Invoke then returns a *invoker.StreamError).
	Fail string

	// NoResult leaves out the CLI's terminal event, as a CLI that crashes
	// mid-stream (or a program that is not the CLI) does: Invoke then
	// reports ErrNoResult, or an *invoker.ExitError with ExitCode. In the
	// long-lived mode (a session, or a run with Approve or MCPServers),
	// the first turn leaves out its end and the agent exits there with
	// ExitCode.
	NoResult bool

	// ExitCode is the agent's exit status (with Fail, the CLI's own
	// status for a failed turn when zero).
	ExitCode int

	// Stderr is written to the agent's standard error.
	Stderr string

	// IgnoreSignals makes the agent ignore SIGINT and SIGTERM, as a CLI
	// that hangs does: only the end of the ladder, SIGKILL, stops it.
	IgnoreSignals bool

	// Ask makes every turn ask permission to run this shell command
	// before it answers, in the CLI's own protocol, as the CLI asks a
	// run's Approve callback (invoker.Request.Approve): Claude Code's
	// can_use_tool request, Codex's command approval request, ACP's
	// session/request_permission. When allowed, the command runs with
	// sh -c in the working directory (for Claude Code, the changed
	// command of a Decision.Input), so a test can look for a file it
	// creates, and the answer starts with the line "approved"; when
	// denied, it does not run, and the answer starts with "denied",
	// followed for Claude Code by ": " and Decision.Message (the other
	// CLIs carry no message). An allow for the session is remembered:
	// later turns of a session run the command without asking. Ask acts
	// in the CLI's long-lived mode, which runs with Approve (or
	// MCPServers) take; the one-shot mode ignores it.
	Ask string

	// AskCount, above 1, makes Ask that many questions at once, as the
	// parallel tool calls of one model response: each is a tool call of
	// its own, all are asked before any answer is awaited, and the answer
	// has one line for each ("approved", "denied: ..."), in order.
	AskCount int

	// Edit makes every turn ask permission to write this file (a path
	// relative to the working directory, or absolute) after Ask, in the
	// CLI's own protocol, as the CLI asks a run's Approve callback before
	// it changes a file: Claude Code's can_use_tool request for its Write
	// tool, Codex's file change approval request (after the fileChange
	// item that describes the change), ACP's session/request_permission
	// for Gemini CLI's write_file (a tool call of kind edit). Approve
	// sees an invoker.Approval of Kind "file_change" whose Paths hold the
	// file's absolute path. When allowed, the agent writes the line
	// "edited by the fake agent" into the file, creating it (and its
	// directory) if need be, or replacing what it held (for Claude Code,
	// the file_path and content of a Decision.Input's changed input), and
	// the answer's line for it is "edited" ("edit failed: " and why, when
	// the write fails); when denied, the file is left alone, and the line
	// is "denied", followed for Claude Code by ": " and Decision.Message
	// (the other CLIs carry no message). An allow for the session is
	// remembered: later turns of a session write the file without asking.
	// Like Ask, Edit acts in the long-lived mode only.
	Edit string

	// CallTool makes every turn call a tool of an MCP server of the run
	// (invoker.Request.MCPServers), named "server/tool", with ToolArgs,
	// after Ask and Edit and before the answer, the way the CLI calls the
	// tools of such servers; a Go server (MCPServer.Server) is reached as
	// the library serves it to the CLI. The answer holds the tool's result
	// text, after the lines of Ask and Edit: "tool error: " and the text for
	// an error result, "tool failed: " and why for a call that got no result
	// (an unknown server or tool). When the CLI asks about the call (Claude
	// Code and Gemini CLI ask, unless the library lets the request's servers
	// run), Approve decides as for Ask, and a denial gives the line
	// "denied". Cancelling the turn cancels the call. Like Ask, CallTool
	// acts in the long-lived mode only.
	CallTool string

	// ToolArgs are the arguments of CallTool's call.
	ToolArgs map[string]any

	// LeaveBehind makes the agent start a process in its group and a
	// daemon that leaves its session (setsid), as a tool that spawns
	// background work does; the library must kill both. In a session,
	// every turn starts them (and a daemon with an empty environment, as
	// `setsid -f env -i CMD` leaves it): a cancelled turn's are gone when
	// Turn returns, the others when the session closes. (At the tracking
	// level, where the host has no writable cgroup, that last daemon
	// cannot be found; on Linux it ends when the test binary does.)
	LeaveBehind bool
}

// Options returns the invoker.Options that make a backend run a as its
// CLI: the test binary as Binary, and a's script in Env. Add options of
// your own to New after them.
func (a Agent) Options() invoker.Options {
	return invoker.Options{Binary: os.Args[0], Env: fakeagent.Agent(a).Script().Env()}
}

// Main runs the agent when the test binary was started as one, and
// otherwise runs the tests, then fails the test binary if any process an
// Agent started is still alive (Linux). Call it from TestMain:
//
//	func TestMain(m *testing.M) { invokertest.Main(m) }
func Main(m *testing.M) {
	RunAgent() // returns only when this process is not an agent
	os.Exit(fakeagent.CheckOrphans(m).Run())
}

// RunAgent runs the agent, and exits, when this process was started as one
// (by a backend given an Agent's Options); otherwise it returns at once.
// Main calls it. A program that is not a test and runs Agents (a server
// tried with no CLI installed) calls it first thing in main, since the
// agent is the program itself, started again; it then gives the backend
// its own path (os.Executable) as Options.Binary, for os.Args[0] may be
// relative to a directory that is not the run's.
func RunAgent() { fakeagent.Main() }

// Survivors returns the pids of the processes that Agents of this test
// binary started (the agents and everything they started) and that are
// still alive (Linux; nil elsewhere). Once Invoke or Session.Close has
// returned, none of the processes of that run or session is among them.
func Survivors() []int { return fakeagent.Orphans() }

// Agent returns an Agent of cli ("codex", "gemini" or "claude") that does
// what f asks, and the invoker.Options the case needs besides the Agent's
// (a line limit below the answer for AnswerOverLimit). With it, Run checks
// an Invoker built on one of this module's backends — a wrapper of your
// own, say — with no CLI installed:
//
//	invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
//		a, opts := f.Agent("claude")
//		return mywrapper.New(claude.New(a.Options(), opts))
//	})
func (f Fake) Agent(cli string) (Agent, invoker.Options) {
	a := Agent{
		CLI:         cli,
		SessionID:   f.SessionID,
		Answer:      f.Answer,
		Fail:        f.Fail,
		Stderr:      f.Stderr,
		ExitCode:    f.ExitCode,
		NoResult:    f.ExitCode != 0,
		HugeLine:    f.HugeLine,
		Tool:        f.Tool,
		LeaveBehind: f.Grandchild || f.Escapee,
		Ask:         f.Ask,
		AskCount:    f.AskCount,
		Edit:        f.Edit,
		CallTool:    f.CallTool,
		ToolArgs:    f.ToolArgs,
	}
	var opts invoker.Options
	if f.AnswerOverLimit {
		opts.MaxLineSize = 64 << 10 // the smallest limit: the agent prints little
		a.AnswerSize = 2 * opts.MaxLineSize
	}
	if f.Stream {
		// Part of the answer, then a model that never finishes the turn.
		a.Chunks, a.Stall = 3, time.Hour
	}
	return a, opts
}
