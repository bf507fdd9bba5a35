package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks,
// SEP-2663): a client declares the extension in the per-request
// capabilities of its tools/call, and the server decides to answer with a
// task (resultType "task"); the client polls tasks/get, whose answer
// holds the result, the error or the input the task needs, answers that
// input with tasks/update, and stops the task with tasks/cancel. There is
// no tasks/result and no tasks/list. The server declares the extension in
// its server/discover result. The tools of the adapter always answer such
// a call with a task: an agent run takes minutes.

const (
	// tasksExtension is the identifier of the extension.
	tasksExtension = "io.modelcontextprotocol/tasks"
	// clientCapabilitiesKey is the _meta key of a request's client
	// capabilities (MCP 2026-07-28).
	clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
	// protocolVersionKey is the _meta key of a request's protocol version
	// (MCP 2026-07-28).
	protocolVersionKey = "io.modelcontextprotocol/protocolVersion"
)

// wantsExtension reports whether a request's _meta declares the tasks
// extension among its client's capabilities.
func wantsExtension(meta mcp.Meta) bool {
	caps, _ := meta[clientCapabilitiesKey].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[tasksExtension]
	return ok
}

// extensionRequest reports whether a request's _meta names a protocol
// version that has the extension instead of the 2025-11-25 tasks.
func extensionRequest(meta mcp.Meta) bool {
	v, _ := meta[protocolVersionKey].(string)
	return v >= "2026-07-28"
}

// extTask is a task as the extension shows it.
type extTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLSeconds     int64           `json:"ttlSeconds"`
	PollIntervalMS int64           `json:"pollIntervalMilliseconds,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
	InputRequests  map[string]any  `json:"inputRequests,omitempty"`
}

// extTaskResult is a CreateTaskResult (resultType "task") or a tasks/get
// result (resultType "complete") of the extension.
type extTaskResult struct {
	mcp.ResultBase
	extTask
}

// extAck is the empty result of tasks/update and tasks/cancel.
type extAck struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskUpdateParams are the params of tasks/update.
type taskUpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState,omitempty"`
}

// extWire returns r as the extension shows it: for tasks/get, with the
// result, the error or the input requests of its status.
func (e *taskEngine) extWire(r *TaskRecord, lt *liveTask, resultType string) extTask {
	w := extTask{
		ResultType:    resultType,
		TaskID:        r.ID,
		Status:        r.Status,
		StatusMessage: r.StatusMessage,
		CreatedAt:     r.Created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: r.Updated.UTC().Format(time.RFC3339Nano),
		TTLSeconds:    int64(r.TTL / time.Second),
	}
	if !r.Terminal() {
		w.PollIntervalMS = e.opts.PollInterval.Milliseconds()
	}
	if resultType != "complete" {
		return w
	}
	switch {
	case r.Status == TaskInputRequired && lt != nil:
		lt.mu.Lock()
		if len(lt.inputs) > 0 {
			w.InputRequests = map[string]any{}
			for key, q := range lt.inputs {
				w.InputRequests[key] = map[string]any{"method": "elicitation/create", "params": q.params}
			}
		}
		lt.mu.Unlock()
	case r.Status == TaskCompleted || r.Status == TaskFailed && r.Result != nil:
		// A tool's isError result is a completed task in the extension;
		// failed is for a JSON-RPC error.
		w.Status, w.Result = TaskCompleted, r.Result
	case r.Status == TaskFailed:
		w.Error = &jsonrpc.Error{Code: r.ErrorCode, Message: r.ErrorMessage}
	}
	return w
}

// An inputRequest is a question of a task's run put to an extension
// client, waiting for its tasks/update.
type inputRequest struct {
	params *mcp.ElicitParams
	answer chan json.RawMessage // buffered(1)
}

// askByUpdate asks the extension client params through tasks/get and
// waits for its tasks/update, or for ctx's end.
func (lt *liveTask) askByUpdate(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	q := &inputRequest{params: params, answer: make(chan json.RawMessage, 1)}
	lt.mu.Lock()
	lt.inputSeq++
	key := fmt.Sprintf("approval-%d", lt.inputSeq)
	if lt.inputs == nil {
		lt.inputs = map[string]*inputRequest{}
	}
	lt.inputs[key] = q
	lt.mu.Unlock()
	defer func() {
		lt.mu.Lock()
		delete(lt.inputs, key)
		lt.mu.Unlock()
	}()
	lt.setStatus(TaskInputRequired, params.Message)
	defer lt.setStatus(TaskWorking, "the client answered: working")
	select {
	case raw := <-q.answer:
		var res mcp.ElicitResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("the client's answer to %s is not an elicitation result: %w", key, err)
		}
		return &res, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// update serves tasks/update: each answer goes to the question of its key,
// if it is outstanding. The answer is an empty acknowledgement, whether
// the task exists or not, as the extension has it.
func (e *taskEngine) update(ctx context.Context, _ *mcp.ServerSession, p *taskUpdateParams) (*extAck, error) {
	if _, lt, err := e.lookup(ctx, p.TaskID); err == nil && lt != nil {
		lt.mu.Lock()
		for key, raw := range p.InputResponses {
			if q, ok := lt.inputs[key]; ok {
				select {
				case q.answer <- raw:
				default: // answered already
				}
			}
		}
		lt.mu.Unlock()
	}
	return &extAck{ResultType: "complete"}, nil
}

// extensionTask reports whether ctx is the run of a task of the extension.
func extensionTask(ctx context.Context) bool {
	lt := taskOf(ctx)
	return lt != nil && lt.ext
}

// errNotInExtension is the error of tasks/result and tasks/list, which the
// extension does not have.
func errNotInExtension(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " is not a method of the tasks extension (io.modelcontextprotocol/tasks): poll with tasks/get, which holds the result"}
}
