package invoker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// Each example runs the real codex backend against a scripted stand-in for
// the codex CLI (invokertest.Agent: this test binary, whose TestMain hands
// over to it), so that its output is checked. In a program, codex.New()
// takes the place of codex.New(agent.Options()).

func TestMain(m *testing.M) { invokertest.Main(m) }

// workdir is the examples' working directory: any existing absolute path.
var workdir = os.TempDir()

// Events arrive in order, from one goroutine, while the CLI runs; the
// Result holds the final answer once Invoke returns, with the CLI and
// every process it started gone.
func Example() {
	inv := codex.New(invokertest.Agent{SessionID: "thread-1", Tool: true, Answer: "It prints hello."}.Options())

	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "What does `echo hello` print?",
		Workdir: workdir,
		OnEvent: func(ev invoker.Event) {
			switch ev.Kind {
			case invoker.KindToolCall:
				fmt.Printf("%s %s %s\n", ev.Kind, ev.Tool.Name, ev.Tool.Input)
			case invoker.KindToolResult:
				fmt.Printf("%s %s %q\n", ev.Kind, ev.Tool.Status, ev.Tool.Output)
			case invoker.KindMessage:
				fmt.Printf("%s %q\n", ev.Kind, ev.Text)
			case invoker.KindUsage:
				fmt.Println(ev.Kind, ev.Usage.OutputTokens, "output tokens")
			default:
				fmt.Println(ev.Kind, ev.SessionID)
			}
		},
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("answer: %s (session %s, exit status %d)\n", res.Text, res.SessionID, res.ExitCode)
	// Output:
	// session thread-1
	// tool_call command_execution {"command":"/bin/bash -lc 'echo hello'"}
	// tool_result completed "hello\n"
	// message "It prints hello."
	// usage 5 output tokens
	// done thread-1
	// answer: It prints hello. (session thread-1, exit status 0)
}

// Cancelling the context stops the CLI with the signal ladder and reaps its
// tree. The error matches context.Canceled (context.DeadlineExceeded for a
// deadline), and the Result keeps the session id and the partial answer,
// so the turn can be resumed.
func Example_cancel() {
	// The fake says "One. Two." and then waits on a model that never
	// finishes the turn.
	inv := codex.New(invokertest.Agent{SessionID: "thread-2", Answer: "One. Two.", Stall: time.Hour}.Options())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := inv.Invoke(ctx, invoker.Request{
		Prompt:  "Count to three, slowly.",
		Workdir: workdir,
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				cancel() // enough
			}
		},
	})
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		fmt.Println("stopped:", err)
		fmt.Printf("partial answer %q, resume with session %s\n", res.Text, res.SessionID)
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println(res.Text)
	}
	// Output:
	// stopped: codex: context canceled
	// partial answer "One. Two.", resume with session thread-2
}

// A cancel's cause tells the caller why it stopped the run; it is named in
// the error, but errors.Is and errors.As do not find it there: the run did
// not fail with it. Ask context.Cause for it. In an errgroup, this is why
// the runs stopped because a sibling failed do not report the sibling's
// error as their own.
func Example_cancelCause() {
	inv := codex.New(invokertest.Agent{Answer: "Working on it.", Stall: time.Hour}.Options())

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopped := errors.New("the user pressed stop")
	_, err := inv.Invoke(ctx, invoker.Request{
		Prompt:  "Refactor the parser.",
		Workdir: workdir,
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				cancel(stopped)
			}
		},
	})
	fmt.Println(err)
	fmt.Println("cancelled:", errors.Is(err, context.Canceled))
	fmt.Println("matches the cause:", errors.Is(err, stopped))
	fmt.Println("cause:", context.Cause(ctx))
	// Output:
	// codex: context canceled (cause: the user pressed stop)
	// cancelled: true
	// matches the cause: false
	// cause: the user pressed stop
}

// A turn that returned a session id can be resumed: pass it as
// Request.SessionID. The permission is the new request's, whatever the
// first turn had.
func Example_resume() {
	first := codex.New(invokertest.Agent{SessionID: "thread-3", Answer: "main.go starts a server."}.Options())
	res, err := first.Invoke(context.Background(), invoker.Request{Prompt: "What does main.go do?", Workdir: workdir})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.SessionID, res.Text)

	// The fake reports the session it was asked to resume, as the CLI does.
	next := codex.New(invokertest.Agent{Answer: "Added a -port flag."}.Options())
	res, err = next.Invoke(context.Background(), invoker.Request{
		Prompt:     "Make its port configurable.",
		Workdir:    workdir,
		SessionID:  res.SessionID,
		Permission: invoker.WorkspaceWrite,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.SessionID, res.Text)
	// Output:
	// thread-3 main.go starts a server.
	// thread-3 Added a -port flag.
}

// Errors name the CLI and match sentinels and types with errors.Is and
// errors.As: a failure the CLI reported in its stream is a *StreamError, a
// non-zero exit with nothing better to say an *ExitError, and an exit
// without the CLI's terminal event ErrNoResult. Success needs that event:
// exit status 0 is not enough.
func Example_errors() {
	agents := []invokertest.Agent{
		{Fail: "You exceeded your current quota (429)"},
		{ExitCode: 3, NoResult: true, Stderr: "fatal: config.toml: bad key\n"},
		{NoResult: true},
	}
	for _, a := range agents {
		_, err := codex.New(a.Options()).Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: workdir})
		var se *invoker.StreamError
		var ee *invoker.ExitError
		switch {
		case errors.Is(err, invoker.ErrRateLimited):
			fmt.Println("rate limited; retry later:", errors.As(err, &se), se.Message)
		case errors.As(err, &ee):
			fmt.Printf("exit status %d, stderr %q\n", ee.ExitCode, ee.Stderr)
		case errors.Is(err, invoker.ErrNoResult):
			fmt.Println("no result")
		}
	}
	// Output:
	// rate limited; retry later: true You exceeded your current quota (429)
	// exit status 3, stderr "fatal: config.toml: bad key\n"
	// no result
}

// An Invoker says which optional Request fields its CLI honours; a field
// it does not is refused before anything starts, with an error matching
// ErrUnsupported (and errors.ErrUnsupported).
func ExampleCapabilities() {
	for _, inv := range []invoker.Invoker{codex.New(), gemini.New()} {
		caps := inv.Capabilities()
		fmt.Println(inv.Name(), caps, "images:", caps.Supports("Images"))
	}

	_, err := gemini.New().Invoke(context.Background(), invoker.Request{
		Prompt:  "Describe this picture.",
		Workdir: workdir,
		Images:  []string{"/tmp/picture.png"},
	})
	fmt.Println(errors.Is(err, invoker.ErrUnsupported), errors.Is(err, errors.ErrUnsupported))
	// Output:
	// codex Capabilities{Model Resume Images SystemPrompt OutputSchema Fork Deltas Approve GoTools MCPServers Sessions Steer SwitchModel SwitchPermission} images: true
	// gemini Capabilities{Model Resume Deltas Approve GoTools MCPServers Sessions SwitchModel SwitchPermission} images: false
	// true true
}

// Events encode to JSON and decode back; the kind reads as its name.
func ExampleEventKind() {
	b, _ := json.Marshal(invoker.Event{Kind: invoker.KindToolCall, SessionID: "thread-1", Tool: &invoker.Tool{Name: "Bash", ID: "t1"}})
	fmt.Println(string(b))

	var ev invoker.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		fmt.Println(err)
	}
	fmt.Println(ev.Kind == invoker.KindToolCall, ev.Tool.Name)
	// Output:
	// {"kind":"tool_call","session_id":"thread-1","tool":{"name":"Bash","id":"t1"}}
	// true Bash
}

// A session holds a conversation in one warm CLI process: each Turn skips
// the CLI's start-up, and Close returns once the CLI and every process it
// started are gone. (In a program: claude.New().)
func ExampleSession() {
	inv := claude.New(invokertest.Agent{CLI: "claude", SessionID: "4f8e0c5e-5b5a-4d8e-9e3c-1c2b3a4d5e6f",
		Answers: []string{"main.go starts a server.", "Added a -port flag."}}.Options())

	s, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: workdir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, prompt := range []string{"What does main.go do?", "Add a -port flag."} {
		res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: prompt})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Text)
	}
	fmt.Println("session", s.ID())
	// Output:
	// main.go starts a server.
	// Added a -port flag.
	// session 4f8e0c5e-5b5a-4d8e-9e3c-1c2b3a4d5e6f
}

// A policy for Request.Approve compares what an Approval says, the same
// way for every CLI: Kind against the Approval constants, Paths against
// Workdir (both absolute and resolved, so a path that escapes through a
// link or ".." shows where it lands), an MCP tool by its server and name.
// Building Approvals by hand, as here, is how such a policy is tested.
func ExampleApproval() {
	policy := func(_ context.Context, a invoker.Approval) invoker.Decision {
		switch a.Kind {
		case invoker.ApprovalFileChange:
			src := filepath.Join(a.Workdir, "src") + string(filepath.Separator)
			for _, p := range a.Paths {
				if !strings.HasPrefix(p, src) {
					return invoker.Decision{Message: p + " is outside src"}
				}
			}
			return invoker.Decision{Allow: true}
		case invoker.ApprovalMCPTool:
			return invoker.Decision{Allow: a.MCP.Server == "tickets" && a.MCP.Tool == "comment"}
		case invoker.ApprovalCommand:
			return invoker.Decision{Allow: a.Command == "go test ./..." && a.Cwd == a.Workdir}
		}
		return invoker.Decision{Message: "not allowed: " + a.Tool.Name}
	}
	wd := filepath.Join(string(filepath.Separator), "home", "me", "project")
	edit := invoker.Approval{Kind: invoker.ApprovalFileChange, Workdir: wd,
		Paths: []string{filepath.Join(wd, "src", "main.go"), filepath.Join(wd, "README.md")}}
	tool := invoker.Approval{Kind: invoker.ApprovalMCPTool, Tool: invoker.Tool{Name: "mcp__tickets__comment"}, Workdir: wd}
	tool.MCP.Server, tool.MCP.Tool = "tickets", "comment"
	test := invoker.Approval{Kind: invoker.ApprovalCommand, Command: "go test ./...", Cwd: wd, Workdir: wd}
	for _, a := range []invoker.Approval{edit, tool, test} {
		d := policy(context.Background(), a)
		fmt.Printf("%s: allow %v %q\n", a.Kind, d.Allow, filepath.ToSlash(d.Message))
	}
	// Output:
	// file_change: allow false "/home/me/project/README.md is outside src"
	// mcp_tool: allow true ""
	// command: allow true ""
}
