package mcpadapter_test

// The tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks),
// served in stateless HTTP mode to a go-sdk client of that version that
// declares the extension: the server answers the tools' calls with a task,
// tasks/get holds the result or the question, tasks/update answers the
// question, and tasks/cancel stops the run.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

type extCallParams struct {
	mcp.ParamsBase
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

type extTaskRes struct {
	mcp.ResultBase
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	TTLSeconds     *int64                     `json:"ttlSeconds"`
	PollIntervalMS int64                      `json:"pollIntervalMilliseconds"`
	Result         *taskResultRes             `json:"result"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

type extUpdateParams struct {
	mcp.ParamsBase
	TaskID         string         `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses"`
}

type extAckRes struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// dialExtension connects a client of protocol 2026-07-28 that declares
// the tasks extension to the stateless server s.
func dialExtension(t *testing.T, s *accessServer) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/tasks", nil)
	client := mcp.NewClient(&mcp.Implementation{Name: "ext-client", Version: "v0.0.1"}, &mcp.ClientOptions{Capabilities: caps})
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*extCallParams, *extTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *extTaskRes](client, "tasks/get"),
		mcp.AddSendingCustomMethod[*taskIDArgs, *extAckRes](client, "tasks/cancel"),
		mcp.AddSendingCustomMethod[*extUpdateParams, *extAckRes](client, "tasks/update"),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: taskCalls{base: http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func extCreate(t *testing.T, cs *mcp.ClientSession, args map[string]any) *extTaskRes {
	t.Helper()
	res, err := mcp.CallCustomMethod[*extCallParams, *extTaskRes](ctxT(t), cs, taskCallMethod, &extCallParams{Name: "agent", Arguments: args})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.ResultType != "task" || res.Status != mcpadapter.TaskWorking || res.TaskID == "" || res.TTLSeconds == nil || res.PollIntervalMS <= 0 {
		t.Fatalf("tools/call = %+v, want a task (resultType task, working, ttlSeconds, pollIntervalMilliseconds)", res)
	}
	return res
}

func extGet(t *testing.T, cs *mcp.ClientSession, id string) *extTaskRes {
	t.Helper()
	res, err := mcp.CallCustomMethod[*taskIDArgs, *extTaskRes](ctxT(t), cs, "tasks/get", &taskIDArgs{TaskID: id})
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	if res.ResultType != "complete" {
		t.Errorf("tasks/get resultType = %q, want complete", res.ResultType)
	}
	return res
}

// extPoll polls tasks/get until the task's status is not working.
func extPoll(t *testing.T, cs *mcp.ClientSession, id string) *extTaskRes {
	t.Helper()
	ctx := ctxT(t)
	for {
		res := extGet(t, cs, id)
		if res.Status != mcpadapter.TaskWorking || ctx.Err() != nil {
			return res
		}
	}
}

func TestTaskExtension(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{Tasks: mcpadapter.TaskOptions{PollInterval: 5 * time.Millisecond}}, true, inv)
	cs := dialExtension(t, s)
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Extensions["io.modelcontextprotocol/tasks"] == nil {
		t.Errorf("server/discover capabilities = %+v, want the tasks extension", caps)
	}
	dir := t.TempDir()

	// A task that completes: tasks/get holds the result.
	task := extCreate(t, cs, taskArgs(dir, "extended"))
	<-inv.reached
	if got := extGet(t, cs, task.TaskID); got.Status != mcpadapter.TaskWorking || got.Result != nil {
		t.Errorf("tasks/get = %+v, want working without a result", got)
	}
	inv.release <- struct{}{}
	got := extPoll(t, cs, task.TaskID)
	var out mcpadapter.Output
	if got.Result != nil {
		json.Unmarshal(got.Result.StructuredContent, &out)
	}
	if got.Status != mcpadapter.TaskCompleted || got.Result == nil || got.Result.IsError || out.Text != "done: extended" {
		t.Errorf("tasks/get at the end = %+v (output %+v), want completed with the run's result", got, out)
	}

	// tasks/result and tasks/list are not methods of the extension.
	_, err := mcp.CallCustomMethod[*taskIDArgs, *taskResultRes](ctxT(t), cs, "tasks/result", &taskIDArgs{TaskID: task.TaskID})
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("tasks/result in the extension: %v, want -32601", err)
	}

	// A task cancelled: acknowledged, the run stopped, the task cancelled.
	task = extCreate(t, cs, taskArgs(dir, "stop me"))
	<-inv.reached
	ack, err := mcp.CallCustomMethod[*taskIDArgs, *extAckRes](ctxT(t), cs, "tasks/cancel", &taskIDArgs{TaskID: task.TaskID})
	if err != nil || ack.ResultType != "complete" {
		t.Fatalf("tasks/cancel = %+v, %v; want an acknowledgement", ack, err)
	}
	if cause := <-inv.causes; !errors.Is(cause, mcpadapter.ErrTaskCancelled) {
		t.Errorf("the run's cancellation cause = %v, want ErrTaskCancelled", cause)
	}
	if got := extGet(t, cs, task.TaskID); got.Status != mcpadapter.TaskCancelled {
		t.Errorf("tasks/get after tasks/cancel = %+v, want cancelled", got)
	}
	// A cancel of a task that does not exist is acknowledged too.
	if _, err := mcp.CallCustomMethod[*taskIDArgs, *extAckRes](ctxT(t), cs, "tasks/cancel", &taskIDArgs{TaskID: "no-such-task"}); err != nil {
		t.Errorf("tasks/cancel of no task: %v, want an acknowledgement", err)
	}
}

// TestTaskExtensionInput: an approval question of the run is the task's
// input_required, with the question in inputRequests; tasks/update
// answers it, and the run gets the answer.
func TestTaskExtensionInput(t *testing.T) {
	inv := newAsker("agent")
	s := newAccessServer(t, &mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit, Tasks: mcpadapter.TaskOptions{PollInterval: 5 * time.Millisecond}}, true, inv)
	cs := dialExtension(t, s)
	task := extCreate(t, cs, taskArgs(t.TempDir(), "ask"))
	got := extPoll(t, cs, task.TaskID)
	if got.Status != mcpadapter.TaskInputRequired || len(got.InputRequests) != 1 {
		t.Fatalf("tasks/get = %+v, want input_required with one input request", got)
	}
	var key string
	for k, raw := range got.InputRequests {
		key = k
		if !strings.Contains(string(raw), `"method":"elicitation/create"`) || !strings.Contains(string(raw), "touch made.txt") {
			t.Errorf("input request %s = %s, want the elicitation of the question", k, raw)
		}
	}
	ack, err := mcp.CallCustomMethod[*extUpdateParams, *extAckRes](ctxT(t), cs, "tasks/update", &extUpdateParams{TaskID: task.TaskID,
		InputResponses: map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"decision": "allow"}}}})
	if err != nil || ack.ResultType != "complete" {
		t.Fatalf("tasks/update = %+v, %v; want an acknowledgement", ack, err)
	}
	if d := <-inv.decided; !d.Allow {
		t.Errorf("the run's decision = %+v, want the client's allow", d)
	}
	ctx := ctxT(t)
	for got.Status != mcpadapter.TaskCompleted && ctx.Err() == nil {
		got = extGet(t, cs, task.TaskID)
	}
	var d invoker.Decision
	if got.Result != nil && len(got.Result.Content) > 0 {
		text, _ := got.Result.Content[0]["text"].(string)
		var o mcpadapter.Output
		json.Unmarshal([]byte(text), &o)
		json.Unmarshal([]byte(o.Text), &d)
	}
	if got.Status != mcpadapter.TaskCompleted || !d.Allow {
		t.Errorf("tasks/get at the end = %+v, want completed, the run allowed", got)
	}
}
