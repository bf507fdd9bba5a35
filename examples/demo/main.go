// Command demo shows what clinvoke guarantees, on this machine, with no
// API key, no network and no agent CLI installed.
//
//	go run ./examples/demo
//	go run ./examples/demo -cli codex -after 3s
//	go run ./examples/demo -twoway=false   # only the cancellation
//
// It runs a scripted fake agent (this same binary, re-executed) through a
// real backend, exactly as the library would run the real CLI, in two
// parts, after saying which containment level this machine gives the runs
// (invoker.Capabilities), what that means for them, and, when it is not
// the best, why and how to get the best.
//
// First, two-way control (skipped with -twoway=false): in a temporary
// workdir, the fake asks to run a command that creates a file, in the
// chosen CLI's own permission protocol. The demo's Request.Approve
// callback prints the invoker.Approval it gets and denies it with a
// message: the file is not created, and the agent's answer says it was
// denied. In a second run the callback allows the command (the file is
// there) and the fake calls tickets/create, a tool of a tiny go-sdk MCP
// server given in Request.MCPServers: the Go handler prints the arguments
// it got, and the agent's answer carries the tool's result.
//
// Then cancellation: the fake speaks the CLI's JSONL stream, calls a
// tool, starts a grandchild and a process that escapes into a session of
// its own (as the real CLIs do with their tool commands), and keeps
// talking. After a moment the demo cancels the context, then prints what
// happened to the process tree: the processes the fake started, the
// signals sent, and how many survived.
//
// Unlike the other examples it imports internal/testkit/fakeagent: the fake agent
// is the point of the demo, and it is not part of the library's API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

func main() {
	fakeagent.Main() // when re-executed as the fake agent, this never returns

	cli := flag.String("cli", "claude", "which CLI's stream the fake agent speaks: codex, gemini or claude")
	after := flag.Duration("after", 2*time.Second, "cancel the run this long after the agent's first event")
	stubborn := flag.Bool("stubborn", false, "make the fake agent ignore SIGINT and SIGTERM, so the ladder ends in SIGKILL")
	twoway := flag.Bool("twoway", true, "first show two-way control: an Approve callback and a tool written in Go")
	flag.Parse()
	if err := demo(os.Stdout, *cli, *after, *stubborn, *twoway); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo runs the demo for the CLI cli, writing what it shows to out.
func demo(out io.Writer, cli string, after time.Duration, stubborn, twoway bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	newInvoker := map[string]func(...invoker.Options) invoker.Invoker{
		"codex": codex.New, "gemini": gemini.New, "claude": claude.New,
	}[cli]
	if newInvoker == nil {
		return fmt.Errorf("unknown -cli %q: use codex, gemini or claude", cli)
	}
	out = &lockedWriter{w: out} // Approve, tool handlers and OnEvent run on goroutines of the run
	fmt.Fprintln(out, containment(newInvoker(invoker.Options{Binary: exe}).Capabilities()))
	if twoway {
		if err := twoWay(out, cli, newInvoker, exe); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	record, err := os.MkdirTemp("", "clinvoke-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(record)
	script := fakeagent.Script{
		Flavor:        cli,
		Tool:          true,
		StreamFor:     time.Second,
		Answer:        "The parser now builds its tree in one pass; running the tests next.",
		Chunks:        4,
		StallFor:      time.Minute, // then it waits on a model that never answers
		Interval:      150 * time.Millisecond,
		Grandchild:    true,
		Escapee:       true,
		IgnoreSignals: stubborn,
		RecordDir:     record,
		Tag:           fmt.Sprintf("demo-%d", os.Getpid()),
	}

	start := time.Now()
	stamp := func() string { return fmt.Sprintf("%6.3fs", time.Since(start).Seconds()) }
	lifecycle := &lifecycleHandler{stamp: stamp}
	inv := newInvoker(
		invoker.Options{Binary: exe, Logger: slog.New(lifecycle), InterruptGrace: time.Second, TerminateGrace: time.Second},
	)

	// The countdown starts at the first event, not at Invoke: by then the
	// fake has started its whole tree (and recorded it), however long a
	// busy machine took to start it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wd, _ := os.Getwd()
	fmt.Fprintf(out, "Running a fake %s agent through clinvoke; cancelling %v after its first event.\n\n", cli, after)
	events := 0
	var countdown *time.Timer
	res, err := inv.Invoke(ctx, invoker.Request{
		Prompt:     "Refactor the parser and run the tests.",
		Workdir:    wd,
		Permission: invoker.WorkspaceWrite,
		Env:        script.Env(),
		OnEvent: func(ev invoker.Event) {
			if events == 0 {
				countdown = time.AfterFunc(after, cancel)
			}
			events++
			fmt.Fprintf(out, "%s  event %-11s %s\n", stamp(), ev.Kind, describe(ev))
		},
	})

	if countdown != nil {
		countdown.Stop()
	}
	fmt.Fprintf(out, "\nInvoke returned after %v with %d events.\n", res.Duration.Round(time.Millisecond), events)
	fmt.Fprintf(out, "  error:      %v\n", err)
	fmt.Fprintf(out, "  cancelled:  %v (cancelled -after the first event: the error matches context.Canceled)\n", errors.Is(err, context.Canceled))
	fmt.Fprintf(out, "  session id: %s (pass it as Request.SessionID to resume)\n", res.SessionID)
	fmt.Fprintf(out, "  text:       %q\n", truncate(res.Text, 70))
	fmt.Fprintf(out, "  exit code:  %d\n", res.ExitCode)
	fmt.Fprintf(out, "  containment: %s (the level that held this run)\n", res.Containment)

	rec, rerr := fakeagent.ReadRecord(record)
	if rerr != nil {
		return rerr
	}
	fmt.Fprintf(out, "\nThe process tree:\n")
	fmt.Fprintf(out, "  processes started: %d\n", len(rec.Procs))
	for _, p := range rec.Procs {
		fmt.Fprintf(out, "    pid %-7d %s\n", p.Pid, roles[p.Role])
	}
	fmt.Fprintf(out, "  what clinvoke did:\n")
	for _, line := range lifecycle.lines {
		fmt.Fprintf(out, "    %s\n", line)
	}
	survivors := append(rec.Alive(), fakeagent.Survivors(script.Tag)...)
	fmt.Fprintf(out, "  survivors: %d\n", len(survivors))
	if len(survivors) > 0 {
		return fmt.Errorf("processes survived: %v", survivors)
	}
	return nil
}

// containment says in plain words which containment level this machine
// gives the runs, what it means for them, and why not a better one.
func containment(caps invoker.Capabilities) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Containment level on this machine: %s.\n", caps.Containment)
	switch caps.Containment {
	case "cgroup":
		b.WriteString("  Each run gets a cgroup of its own: every process the agent starts is born in it\n" +
			"  and cannot leave it unless it may write cgroupfs (an agent run as root can),\n" +
			"  and stopping the run is one write to cgroup.kill.\n")
	case "tracking":
		b.WriteString("  No cgroup this process may use, so a run's processes are found by process group,\n" +
			"  session, parent links recorded as they run, and a marker in their environment.\n" +
			"  That finds every process of this demo's agent; a tool that leaves the session and\n" +
			"  clears its environment (setsid -f env -i) before it is seen could outlive the run.\n")
	case "job":
		b.WriteString("  Each run is a Windows Job Object, closed and so killed with everything in it.\n")
	case "group":
		b.WriteString("  A run is its process group and the processes found by parent links when it is\n" +
			"  stopped; a process that leaves the group and loses its parent could outlive it.\n")
	}
	if caps.ContainmentNote != "" {
		fmt.Fprintf(&b, "  Why not better: %s\n", caps.ContainmentNote)
	}
	return b.String()
}

var roles = map[string]string{
	"agent":   "the CLI",
	"sleeper": "a grandchild in the CLI's process group",
	"escapee": "a helper that left the CLI's session (setsid) and exited",
	"escaped": "its orphan: another session, re-parented away from the CLI",
	"holder":  "a grandchild holding the CLI's stdout",
}

func describe(ev invoker.Event) string {
	switch {
	case ev.Tool != nil:
		return strings.TrimSpace(ev.Tool.Name + " " + truncate(string(ev.Tool.Input), 40) + " " + ev.Tool.Status)
	case ev.SessionID != "" && ev.Kind == invoker.KindSession:
		return ev.SessionID
	default:
		return truncate(ev.Text, 60)
	}
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// lifecycleHandler keeps the engine's records about signals and sweeps, to
// show what was done to the tree.
type lifecycleHandler struct {
	stamp func() string
	mu    sync.Mutex
	lines []string
}

func (h *lifecycleHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *lifecycleHandler) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "proc: started", "proc: reaped", "proc: killed":
		return nil // the engine's own records say the same
	case "proc: the cgroup level is unavailable; tracking":
		return nil // the demo says it first, in plain words
	}
	var b strings.Builder
	b.WriteString(h.stamp() + "  " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "cli" && a.Key != "stack" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h *lifecycleHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lifecycleHandler) WithGroup(string) slog.Handler      { return h }

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
