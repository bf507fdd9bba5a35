//go:build e2e

package e2e

// The MCP tasks of examples/mcpserver driven by the official TypeScript
// SDK's client.experimental.tasks (mcptasks.mjs) over streamable HTTP with
// bearer tokens, the fake codex underneath (a tool tree of a grandchild
// and a setsid daemon): a task is returned at once and its polls show
// progress, its result is a plain call's, tasks/cancel leaves nothing, a
// new connection gets the result, another identity sees nothing, and a
// task nobody asks about is cancelled after the abandonment bound, with
// nothing left.

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
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
	fake := goBuild(t, bins, "fakecodex", "./examples/demo")
	root := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: 1500 * time.Millisecond, Grandchild: true, Escapee: true,
		Answer: "done", Tag: fakeagent.NewTag()}
	srv := exec.Command(server, "-cli", "codex", "-codex-bin", fake, "-root", root, "-transcript", transcript, "-progress", "1ms",
		"-task-poll", "100ms", "-task-abandon", "1s", "-http", "127.0.0.1:0", "-auth-tokens", tokenFile(t, "ts-client:"+tsToken, "other:"+otherToken))
	srv.Env = append(os.Environ(), s.Env()...)
	url := startLogged(t, srv)

	js, err := json.Marshal(map[string]any{"url": url, "token": tsToken, "other": otherToken, "root": root})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, driver, string(js))
	cmd.Dir = filepath.Dir(driver)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill() // no-op once it exited, as it should have
		cmd.Wait()
		if t.Failed() {
			t.Logf("driver and server stderr:\n%s", stderr.String())
		}
	})

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
		checkTaskStep(t, &r, transcript)
		if r.Step == "abandon" {
			waitFinal(t, transcript, "abandon me")
		}
		waitRunsEnded(t, transcript)
		noSurvivorsBut(t, s.Tag, server)
		os.Stdout.Sync()
		stdin.Write([]byte("\n"))
	}
	if want := []string{"task", "cancel", "reconnect", "other identity", "abandon", "abandoned"}; !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q", steps, want)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("driver: %v", err)
	}
	srv.Process.Signal(os.Interrupt)
	srv.Wait()
	if !srv.ProcessState.Success() {
		t.Errorf("server exit: %v, want success", srv.ProcessState)
	}
	noSurvivorsBut(t, s.Tag)
}

var progressRE = regexp.MustCompile(`running: |thinking|writing`)

func checkTaskStep(t *testing.T, r *tsTaskReport, transcript string) {
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
		if len(progress) == 0 {
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
