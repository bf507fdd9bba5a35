//go:build e2e

package e2e

// The MCP tasks of examples/mcpserver driven by the official TypeScript
// SDK's client.experimental.tasks (mcptasks.mjs) over streamable HTTP with
// bearer tokens, with the fake codex underneath (a tool tree of a
// grandchild and a setsid daemon) and with each real CLI, its model the
// loopback fake: a task is returned at once and its polls show
// progress, its result is a plain call's, tasks/cancel leaves nothing, a
// new connection gets the result, another identity sees nothing, and a
// task nobody asks about is cancelled after the abandonment bound, with
// nothing left.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

type tsTaskMessage struct {
	Type          string             `json:"type"`
	TaskID        string             `json:"taskId"`
	Status        string             `json:"status"`
	StatusMessage string             `json:"statusMessage"`
	PollInterval  int                `json:"pollInterval"`
	IsError       bool               `json:"isError"`
	Out           *mcpadapter.Output `json:"out"`
	Error         string             `json:"error"`
}

type tsToolResult struct {
	IsError bool               `json:"isError"`
	Out     *mcpadapter.Output `json:"out"`
}

type tsRefusal struct {
	Refused bool   `json:"refused"`
	Code    int    `json:"code"`
	Error   string `json:"error"`
}

type tsTaskReport struct {
	Step        string          `json:"step"`
	DriverError string          `json:"driverError"`
	Messages    []tsTaskMessage `json:"messages"`
	Plain       tsToolResult    `json:"plain"`
	TaskID      string          `json:"taskId"`
	Seen        string          `json:"seen"`
	Cancelled   tsTaskMessage   `json:"cancelled"`
	After       tsTaskMessage   `json:"after"`
	Result      tsToolResult    `json:"result"`
	Again       tsRefusal       `json:"again"`
	Listed      []string        `json:"listed"`
	Results     struct {
		Get, Result, Cancel, Missing tsRefusal
		Listed                       int
		Owner                        tsToolResult
	} `json:"results"`
}

// otherToken is the bearer token of another identity.
const otherToken = "other-fedcba9876543210fedcba9876543210"

func TestTypeScriptClientTasks(t *testing.T) {
	node, _ := needNode(t)
	driver, err := filepath.Abs("mcptasks.mjs")
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	server := goBuild(t, bins, "mcpserver", "./examples/mcpserver")
	tokens := tokenFile(t, "ts-client:"+tsToken, "other:"+otherToken)

	// The fake codex streams for 1.5 s under a tool tree of a grandchild
	// and a setsid daemon: every poll of a task finds it at work.
	t.Run("fake", func(t *testing.T) {
		fake := goBuild(t, bins, "fakecodex", "./examples/demo")
		root := t.TempDir()
		transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
		s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: 1500 * time.Millisecond, Grandchild: true, Escapee: true,
			Answer: "done", Tag: fakeagent.NewTag()}
		srv := exec.Command(server, "-cli", "codex", "-codex-bin", fake, "-root", root, "-transcript", transcript, "-progress", "1ms",
			"-task-poll", "100ms", "-task-abandon", "1s", "-http", "127.0.0.1:0", "-auth-tokens", tokens)
		srv.Env = append(os.Environ(), s.Env()...)
		runTasksDriver(t, node, driver, srv, tasksTarget{
			tool: "codex", root: root, transcript: transcript, pollProgress: true,
			survivors: func() []string {
				var left []string
				for _, pid := range fakeagent.Survivors(s.Tag) {
					if pid != srv.Process.Pid {
						left = append(left, fmt.Sprint(pid))
					}
				}
				return left
			},
		})
	})

	// Each real CLI, its model the loopback fake: a run calls the shell
	// tool, and the runs to cancel or abandon are in a tool that never
	// ends (longTool), whose process must not outlive them.
	for _, name := range []string{"codex", "gemini", "claude"} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, cliNamed(name))
			writeFile(t, filepath.Join(r.workdir, "follow.log"), "")
			transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
			args := map[string]any{}
			if r.cli.model != "" {
				args["model"] = r.cli.model
			}
			if r.cli.shell != invoker.ReadOnly {
				args["permission"] = string(r.cli.shell)
			}
			srv := exec.Command(server, "-cli", name, "-"+name+"-bin", r.opts.Binary, "-root", r.workdir, "-transcript", transcript,
				"-max-permission", "unlimited", "-progress", "1ms", "-task-poll", "100ms", "-task-abandon", "3s",
				"-http", "127.0.0.1:0", "-auth-tokens", tokens)
			srv.Env = append(os.Environ(), r.opts.Env...)
			answer := []fakemodel.Turn{fakemodel.Shell("echo hello"), fakemodel.Answer("done")}
			turns := map[string][]fakemodel.Turn{
				"task":           append(slices.Clone(answer), answer...), // the task, then a plain call
				"cancel":         {fakemodel.Shell(longTool)},
				"reconnect":      answer,
				"other identity": answer,
				"abandon":        {fakemodel.Shell(longTool)},
			}
			start := time.Now()
			runTasksDriver(t, node, driver, srv, tasksTarget{
				tool: name, args: args, root: r.workdir, transcript: transcript,
				before: func(step string) { r.srv.Enqueue(turns[step]...) },
				after: func(t *testing.T, step string) {
					// Every turn of the step was taken, but the abandoned
					// run's, which the bound may cut before the CLI asks
					// (the CLI's start may take longer).
					if n := r.srv.Pending(); n != 0 && step != "abandon" && step != "abandoned" {
						t.Errorf("%s: %d scripted model turns left, want none", step, n)
					}
				},
				survivors: func() []string {
					var left []string
					for _, p := range r.survivors() {
						if !strings.HasPrefix(p, fmt.Sprintf("%d ", srv.Process.Pid)) {
							left = append(left, p)
						}
					}
					return left
				},
			})
			t.Logf("%s: the six steps took %v", name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// A tasksTarget is one server that TestTypeScriptClientTasks drives.
type tasksTarget struct {
	tool       string         // the tool the driver calls
	args       map[string]any // the arguments of every call besides prompt and workdir
	root       string         // the workdir of the calls
	transcript string         // the server's -transcript
	// pollProgress: the polls of the task step must show the run's
	// progress (the real CLIs may finish between two polls; their progress
	// shows in the cancel step's polls).
	pollProgress bool
	// before prepares a step before the driver runs it, after runs once
	// the step's runs ended; either may be nil.
	before func(step string)
	after  func(t *testing.T, step string)
	// survivors lists the processes of the runs still alive (the server's
	// own excluded).
	survivors func() []string
}

// tasksSteps are the steps of mcptasks.mjs, in order.
var tasksSteps = []string{"task", "cancel", "reconnect", "other identity", "abandon", "abandoned"}

// runTasksDriver starts srv, runs mcptasks.mjs against it step by step,
// checking each step's report and that no process of the step's runs
// survived, then stops srv.
func runTasksDriver(t *testing.T, node, driver string, srv *exec.Cmd, tg tasksTarget) {
	t.Helper()
	url := startLogged(t, srv)
	js, err := json.Marshal(map[string]any{"url": url, "token": tsToken, "other": otherToken, "root": tg.root, "tool": tg.tool, "args": tg.args})
	if err != nil {
		t.Fatal(err)
	}
	before := func(i int) {
		if tg.before != nil && i < len(tasksSteps) {
			tg.before(tasksSteps[i])
		}
	}
	before(0)
	cmd, stdin, stdout := startNodeDriver(t, node, driver, js)

	noSurvivors := func(what string) {
		if left := tg.survivors(); len(left) > 0 {
			t.Errorf("%s: processes survived: %v", what, left)
		}
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	var steps []string
	for sc.Scan() {
		var r tsTaskReport
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("driver line %q: %v", sc.Text(), err)
		}
		steps = append(steps, r.Step)
		if r.DriverError != "" {
			t.Fatalf("step %s: the driver failed: %s", r.Step, r.DriverError)
		}
		checkTaskStep(t, &r, tg.transcript, tg.pollProgress)
		if r.Step == "abandon" {
			waitFinal(t, tg.transcript, "abandon me")
		}
		waitRunsEnded(t, tg.transcript)
		noSurvivors(r.Step)
		if tg.after != nil {
			tg.after(t, r.Step)
		}
		before(len(steps))
		stdin.Write([]byte("\n"))
	}
	if !slices.Equal(steps, tasksSteps) {
		t.Errorf("steps %q, want %q", steps, tasksSteps)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("driver: %v", err)
	}
	srv.Process.Signal(os.Interrupt)
	srv.Wait()
	if !srv.ProcessState.Success() {
		t.Errorf("server exit: %v, want success", srv.ProcessState)
	}
	noSurvivors("after the server's exit")
}

var progressRE = regexp.MustCompile(`running: |thinking|writing`)

func checkTaskStep(t *testing.T, r *tsTaskReport, transcript string, pollProgress bool) {
	t.Helper()
	done := func(name string, res tsToolResult) {
		if res.IsError || res.Out == nil || res.Out.Status != mcpadapter.StatusCompleted || res.Out.Text != "done" || res.Out.SessionID == "" {
			t.Errorf("%s: %s = %+v, want the fake's answer", r.Step, name, res)
		}
	}
	switch r.Step {
	case "task":
		m := r.Messages
		if len(m) < 3 || m[0].Type != "taskCreated" || m[0].Status != mcpadapter.TaskWorking || m[0].PollInterval != 100 {
			t.Fatalf("task: messages %+v, want taskCreated (working, pollInterval 100), polls, then the result", m)
		}
		var progress []string
		for _, s := range m[1 : len(m)-1] {
			if s.Type != "taskStatus" {
				t.Errorf("task: message %+v between the creation and the result", s)
			}
			if progressRE.MatchString(s.StatusMessage) {
				progress = append(progress, s.StatusMessage)
			}
		}
		if len(progress) == 0 && pollProgress {
			t.Errorf("task: no poll showed the run's progress: %+v", m)
		}
		last := m[len(m)-1]
		if last.Type != "result" {
			t.Fatalf("task: the stream ended with %+v, want the result", last)
		}
		viaTask := tsToolResult{IsError: last.IsError, Out: last.Out}
		done("the task's result", viaTask)
		done("a plain call", r.Plain)
		if viaTask.Out != nil && r.Plain.Out != nil && (viaTask.Out.Text != r.Plain.Out.Text || viaTask.Out.ExitCode != r.Plain.Out.ExitCode || viaTask.Out.Usage != r.Plain.Out.Usage) {
			t.Errorf("task: the task's output %+v differs from a plain call's %+v", *viaTask.Out, *r.Plain.Out)
		}
		t.Logf("task: %d messages, progress seen: %q", len(m), progress)
	case "cancel":
		if !progressRE.MatchString(r.Seen) {
			t.Errorf("cancel: cancelled on the poll %q, want one showing the run's progress", r.Seen)
		}
		t.Logf("cancel: cancelled on the poll %q", r.Seen)
		if r.Cancelled.Status != mcpadapter.TaskCancelled || r.After.Status != mcpadapter.TaskCancelled {
			t.Errorf("cancel: tasks/cancel answered %+v, then tasks/get %+v; want cancelled", r.Cancelled, r.After)
		}
		if !r.Result.IsError || r.Result.Out == nil || r.Result.Out.Status != mcpadapter.StatusCancelled || !strings.Contains(r.Result.Out.Error, "cancelled by the client") {
			t.Errorf("cancel: tasks/result = %+v, want the cancelled run's output", r.Result)
		}
		if !r.Again.Refused || r.Again.Code != -32602 || !strings.Contains(r.Again.Error, "terminal") {
			t.Errorf("cancel: cancelling the cancelled task again: %+v, want -32602", r.Again)
		}
		if e := finalEntry(t, transcript, "cancel this task"); e.Status != mcpadapter.StatusCancelled || !strings.Contains(e.Error, "tasks/cancel") {
			t.Errorf("cancel: the transcript's entry %+v, want cancelled by tasks/cancel", e)
		}
	case "reconnect":
		done("tasks/result on a new connection", r.Result)
		if !slices.Contains(r.Listed, r.TaskID) {
			t.Errorf("reconnect: tasks/list %q lacks the task %s", r.Listed, r.TaskID)
		}
	case "other identity":
		want := strings.ReplaceAll(r.Results.Missing.Error, strings.Repeat("N", 26), r.TaskID)
		for name, got := range map[string]tsRefusal{"get": r.Results.Get, "result": r.Results.Result, "cancel": r.Results.Cancel} {
			if !got.Refused || got.Code != -32602 || got.Error != want {
				t.Errorf("other identity: %s: %+v, want the error of a task that does not exist (%q)", name, got, want)
			}
		}
		if r.Results.Listed != 0 {
			t.Errorf("other identity: tasks/list shows %d tasks, want none", r.Results.Listed)
		}
		done("the owner's tasks/result", r.Results.Owner)
	case "abandoned":
		if r.After.Status != mcpadapter.TaskCancelled || !strings.Contains(r.After.StatusMessage, "abandoned") {
			t.Errorf("abandoned: tasks/get = %+v, want cancelled as abandoned", r.After)
		}
		if e := finalEntry(t, transcript, "abandon me"); e.Status != mcpadapter.StatusCancelled || !strings.Contains(e.Error, "abandoned") {
			t.Errorf("abandoned: the transcript's entry %+v, want cancelled as abandoned", e)
		}
	}
}

// waitFinal waits until the run of prompt has its final transcript line.
func waitFinal(t *testing.T, path, prompt string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	for finalEntry(t, path, prompt).Status == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the run of %q has no final transcript line", prompt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTasksDocSnippet: docs/serving.md quotes the functions that
// mcptasks.mjs runs, so that the page's snippet is the tested one.
func TestTasksDocSnippet(t *testing.T) {
	driver, err := os.ReadFile("mcptasks.mjs")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(driver), "// --- the snippet of docs/serving.md ---\n")
	snippet, _, ok2 := strings.Cut(rest, "// --- end of the snippet ---")
	if !ok || !ok2 {
		t.Fatal("mcptasks.mjs lacks the snippet's markers")
	}
	if !strings.Contains(string(doc), strings.TrimSpace(snippet)) {
		t.Errorf("docs/serving.md does not quote the snippet of mcptasks.mjs:\n%s", snippet)
	}
}
