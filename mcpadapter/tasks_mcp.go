package mcpadapter

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP 2025-11-25 tasks: a tools/call whose params hold "task" returns
// a CreateTaskResult at once, and its run goes on in a context of its own,
// detached from the request's; tasks/get, tasks/result, tasks/list and
// tasks/cancel serve the task. The SDK drops the "task" member of a
// tools/call's params, so Tools.Handler moves it into the params' _meta
// under taskRequestKey before the SDK reads the request (tasks_http.go).

const (
	// taskRequestKey is the _meta key under which Tools.Handler puts the
	// "task" member of a tools/call's params.
	taskRequestKey = "io.github.clinvoke/task-request"
	// relatedTaskKey is the _meta key of a message about a task.
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	// immediateResponseKey is the _meta key of a CreateTaskResult's text
	// for the model.
	immediateResponseKey = "io.modelcontextprotocol/model-immediate-response"
	// progressKey is the _meta key, in tasks/get, of a running task's
	// progress: the latest message, its count, and the answer's text so
	// far.
	progressKey = "io.github.clinvoke/progress"
	// maxTextSoFar bounds, in bytes, the text so far that tasks/get
	// returns (its end).
	maxTextSoFar = 16 << 10
	// taskPage is the number of tasks of a tasks/list page.
	taskPage = 100
)

// taskWire is a task as the protocol shows it.
type taskWire struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// createTaskResult is the result of a task-augmented tools/call.
type createTaskResult struct {
	mcp.ResultBase
	Task taskWire `json:"task"`
}

// taskResult is the result of tasks/get and tasks/cancel.
type taskResult struct {
	mcp.ResultBase
	taskWire
}

// taskListResult is the result of tasks/list.
type taskListResult struct {
	mcp.ResultBase
	Tasks      []taskWire `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// taskListParams are the params of tasks/list.
type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// taskRequest is the "task" member of a task-augmented request.
type taskRequest struct {
	TTL *int64 `json:"ttl,omitempty"` // milliseconds
}

// A taskEngine serves the tasks of one Register call's tools.
type taskEngine struct {
	sh    *shared
	opts  TaskOptions
	store TaskStore
	tools map[string]bool // the tools that take a task

	mu   sync.Mutex
	live map[string]*liveTask // the tasks running in this process
}

// A liveTask is a task running in this process.
type liveTask struct {
	e      *taskEngine
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the record of its end is saved

	saveMu sync.Mutex // serializes the saves of the record, in order

	mu        sync.Mutex
	rec       TaskRecord // the state; saved copies go to the store
	ended     bool       // the end of the run is in rec
	asked     time.Time  // when a client last asked about it
	waiting   int        // tasks/result calls blocked on it
	waiters   []*resultWaiter
	ext       bool                     // created by the 2026-07-28 extension
	inputs    map[string]*inputRequest // the extension's questions, by key
	inputSeq  int
	arrived   chan struct{} // closed, and replaced, when a tasks/result arrives
	abandoned bool
	timer     *time.Timer // the abandonment check
	progress  float64
	message   string
	obs       *observer // the single run's observer, for the text so far
}

func newTaskEngine(sh *shared, opts TaskOptions, tools []*tool) *taskEngine {
	e := &taskEngine{sh: sh, opts: opts, store: opts.Store, tools: map[string]bool{}, live: map[string]*liveTask{}}
	for _, t := range tools {
		e.tools[t.single.Name] = true
		e.tools[t.parallel.Name] = true
	}
	return e
}

// register adds the tasks methods and the middleware that serves
// task-augmented calls and declares the capability.
func (e *taskEngine) register(s *mcp.Server) error {
	s.AddReceivingMiddleware(e.middleware)
	return errors.Join(
		mcp.AddReceivingCustomMethod(s, "tasks/get", e.get),
		mcp.AddReceivingCustomMethod(s, "tasks/result", e.result),
		mcp.AddReceivingCustomMethod(s, "tasks/list", e.list),
		mcp.AddReceivingCustomMethod(s, "tasks/cancel", e.cancelTask),
		mcp.AddReceivingCustomMethod(s, "tasks/update", e.update),
	)
}

func (e *taskEngine) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// Only the clients whose tools/call reach the tools with their
		// "task" are told that the server takes tasks.
		lifted := false
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			lifted = ex.Header.Get(tasksHeader) != ""
		}
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && lifted {
				return &initializeResult{ir}, nil
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && lifted {
				return &listToolsResult{lr, e.tools}, nil
			}
			return res, err
		case "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil && dr.Capabilities != nil {
				dr.Capabilities.AddExtension(tasksExtension, nil)
			}
			return res, err
		case "tools/call":
			if creq, ok := req.(*mcp.CallToolRequest); ok && creq.Params != nil {
				if raw, ok := creq.Params.Meta[taskRequestKey]; ok {
					return e.create(ctx, next, creq, raw)
				}
				if wantsExtension(creq.Params.Meta) && e.tools[creq.Params.Name] {
					return e.create(ctx, next, creq, nil)
				}
			}
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			// The custom methods' handlers see no RequestExtra: the
			// caller's identity goes in the context.
			if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
				ctx = withIdentity(ctx, ex.TokenInfo.UserID)
			}
		}
		return next(ctx, method, req)
	}
}

// create starts the task of a task-augmented tools/call and returns its
// CreateTaskResult.
func (e *taskEngine) create(ctx context.Context, next mcp.MethodHandler, creq *mcp.CallToolRequest, raw any) (mcp.Result, error) {
	name := creq.Params.Name
	if !e.tools[name] {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %q does not take a task: call it without one", name)}
	}
	ext := raw == nil // the 2026-07-28 extension: the server's choice
	var spec taskRequest
	if b, err := json.Marshal(raw); raw != nil && err == nil {
		_ = json.Unmarshal(b, &spec) // a malformed task asks for the defaults
	}
	ttl := e.opts.TTL
	if spec.TTL != nil && *spec.TTL > 0 {
		ttl = min(time.Duration(*spec.TTL)*time.Millisecond, e.opts.MaxTTL)
	}
	now := time.Now()
	lt := &liveTask{e: e, ext: ext, done: make(chan struct{}), arrived: make(chan struct{}), asked: now, rec: TaskRecord{
		ID:            rand.Text(),
		Owner:         identityOf(creq),
		Tool:          name,
		Status:        TaskWorking,
		StatusMessage: "starting " + name,
		Created:       now,
		Updated:       now,
		TTL:           ttl,
		Replica:       e.opts.Replica,
		LeaseUntil:    now.Add(e.opts.Lease),
	}}
	if err := e.store.Save(ctx, lt.snapshot()); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be saved: " + err.Error()}
	}

	// The run's request: the task's _meta key removed, and without the
	// key of the HTTP request, whose end must not cancel the run.
	params := *creq.Params
	params.Meta = maps.Clone(params.Meta)
	delete(params.Meta, taskRequestKey)
	run := &mcp.CallToolRequest{Session: creq.Session, Params: &params}
	if creq.Extra != nil {
		ex := *creq.Extra
		ex.CloseSSEStream = nil
		if ex.Header != nil {
			ex.Header = ex.Header.Clone()
			ex.Header.Del(callKeyHeader)
		}
		run.Extra = &ex
	}
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	lt.cancel = cancel
	tctx = context.WithValue(tctx, liveTaskKey{}, lt)

	e.mu.Lock()
	e.live[lt.rec.ID] = lt
	e.mu.Unlock()
	if e.opts.AbandonAfter > 0 {
		lt.mu.Lock()
		lt.timer = time.AfterFunc(e.opts.AbandonAfter, lt.checkAbandoned)
		lt.mu.Unlock()
	}
	release := e.sh.calls.hold() // Tools.Wait and Shutdown wait for the task
	e.sh.cfg.log.InfoContext(ctx, "task created", logAttrs(withIdentity(ctx, lt.rec.Owner), "tool", name, "task", lt.rec.ID, "ttl", ttl)...)
	go lt.renewLease()
	go func() {
		defer release()
		res, err := next(tctx, "tools/call", run)
		lt.finish(res, err)
		cancel(context.Canceled)
	}()

	if ext {
		return &extTaskResult{extTask: e.extWire(lt.snapshot(), nil, "task")}, nil
	}
	out := &createTaskResult{Task: e.wire(lt.snapshot())}
	out.Meta = mcp.Meta{immediateResponseKey: fmt.Sprintf("The %s run continues as task %s; its result will be available with tasks/result.", name, lt.rec.ID)}
	return out, nil
}

// liveTaskKey is the context key of a task's run.
type liveTaskKey struct{}

// taskOf returns the task whose run ctx is, or nil.
func taskOf(ctx context.Context) *liveTask {
	lt, _ := ctx.Value(liveTaskKey{}).(*liveTask)
	return lt
}

// post records a progress message of the task's run.
func (lt *liveTask) post(msg string, progress float64) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.message, lt.progress = msg, progress
}

// notify returns the progress function of the task's run: it records the
// message for tasks/get, then calls next, if not nil.
func (lt *liveTask) notify(next notifyFunc) notifyFunc {
	return func(ctx context.Context, msg string, progress float64) error {
		lt.post(msg, progress)
		lt.checkRemoteCancel(ctx)
		if next == nil {
			return nil
		}
		return next(ctx, msg, progress)
	}
}

// observe gives the task the observer of its single run.
func (lt *liveTask) observe(o *observer) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.obs = o
}

// snapshot returns a copy of the task's record.
func (lt *liveTask) snapshot() *TaskRecord {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	r := lt.rec
	return &r
}

// touch records that a client asked about the task.
func (lt *liveTask) touch() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.asked = time.Now()
}

// checkAbandoned runs when the abandonment bound may have passed: it
// cancels the run when no client asked about the task within the bound,
// and else checks again when the bound would pass.
func (lt *liveTask) checkAbandoned() {
	bound := lt.e.opts.AbandonAfter
	lt.mu.Lock()
	if lt.rec.Terminal() || lt.abandoned {
		lt.mu.Unlock()
		return
	}
	if idle := time.Since(lt.asked); lt.waiting > 0 || idle < bound {
		lt.timer.Reset(bound - min(idle, bound) + time.Millisecond)
		lt.mu.Unlock()
		return
	}
	lt.abandoned = true
	lt.mu.Unlock()
	lt.e.sh.cfg.log.Warn("task abandoned: its run is cancelled", "task", lt.rec.ID, "tool", lt.rec.Tool, "bound", bound)
	lt.cancel(ErrTaskAbandoned)
}

// finish records the end of the task's run: its status, its result, and
// the deletion of the task TTL later.
func (lt *liveTask) finish(res mcp.Result, err error) {
	e := lt.e
	lt.mu.Lock()
	if lt.timer != nil {
		lt.timer.Stop()
	}
	status, msg := statusOf(res, err)
	rec := &lt.rec
	switch {
	case lt.abandoned:
		status = TaskCancelled
		msg = fmt.Sprintf("abandoned: no client asked about the task for %v, so its run was cancelled", e.opts.AbandonAfter)
	case rec.Status == TaskCancelled: // tasks/cancel: the status stays
		status, msg = TaskCancelled, rec.StatusMessage
	}
	rec.Status, rec.StatusMessage, rec.Updated = status, msg, time.Now()
	rec.LeaseUntil = time.Time{}
	lt.ended = true
	var jerr *jsonrpc.Error
	switch {
	case err != nil && errors.As(err, &jerr):
		rec.ErrorCode, rec.ErrorMessage = jerr.Code, jerr.Message
	case err != nil:
		rec.ErrorCode, rec.ErrorMessage = jsonrpc.CodeInternalError, err.Error()
	default:
		if b, merr := json.Marshal(res); merr == nil {
			rec.Result = b
		} else {
			rec.ErrorCode, rec.ErrorMessage = jsonrpc.CodeInternalError, "the task's result could not be encoded: "+merr.Error()
		}
	}
	lt.obs = nil
	lt.mu.Unlock()

	final, err := lt.save(context.Background())
	if err != nil {
		e.sh.cfg.log.Error("the record of a finished task could not be saved", "task", final.ID, "error", err)
	}
	e.mu.Lock()
	delete(e.live, final.ID)
	e.mu.Unlock()
	close(lt.done)
	e.sh.cfg.log.Info("task ended", "task", final.ID, "tool", final.Tool, "status", final.Status, "message", final.StatusMessage)
	id := final.ID
	time.AfterFunc(final.TTL, func() { _ = e.store.Delete(context.Background(), id) })
}

// statusOf returns the task status and message of a tools/call's outcome.
func statusOf(res mcp.Result, err error) (status, msg string) {
	if err != nil {
		return TaskFailed, err.Error()
	}
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil {
		return TaskFailed, fmt.Sprintf("the call returned a %T, not a tool result", res)
	}
	if !r.IsError {
		return TaskCompleted, "completed"
	}
	msg = "failed"
	if len(r.Content) > 0 {
		if tc, ok := r.Content[0].(*mcp.TextContent); ok {
			msg = tc.Text
		}
	}
	switch o := r.StructuredContent.(type) {
	case Output:
		if o.Status == StatusCancelled {
			return TaskCancelled, msg
		}
	case ParallelOutput:
		if o.Cancelled == len(o.Results) {
			return TaskCancelled, msg
		}
	}
	return TaskFailed, msg
}

// errTaskNotFound is the error of a task that does not exist for the
// caller: it never existed, it was deleted, or another identity owns it.
func errTaskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
		"Failed to retrieve task: task %q not found: no task of yours has this id (a task is deleted its ttl after it ends)", id)}
}

// lookup returns the record of id as the caller may see it, and the live
// task when it runs in this process. Asking about a task counts against
// its abandonment.
func (e *taskEngine) lookup(ctx context.Context, id string) (*TaskRecord, *liveTask, error) {
	e.mu.Lock()
	lt := e.live[id]
	e.mu.Unlock()
	var rec *TaskRecord
	if lt != nil {
		rec = lt.snapshot()
	} else {
		r, err := e.store.Load(ctx, id)
		if errors.Is(err, ErrTaskNotFound) {
			return nil, nil, errTaskNotFound(id)
		}
		if err != nil {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store failed: " + err.Error()}
		}
		rec = r
		if rec.Terminal() && time.Since(rec.Updated) > rec.TTL {
			_ = e.store.Delete(ctx, id)
			return nil, nil, errTaskNotFound(id)
		}
	}
	if rec.Owner != identityFrom(ctx) {
		return nil, nil, errTaskNotFound(id)
	}
	if lt == nil {
		rec = e.expire(ctx, rec)
	}
	if lt != nil {
		lt.touch()
	}
	return rec, lt, nil
}

// wire returns r as the protocol shows it.
func (e *taskEngine) wire(r *TaskRecord) taskWire {
	w := taskWire{
		TaskID:        r.ID,
		Status:        r.Status,
		StatusMessage: r.StatusMessage,
		CreatedAt:     r.Created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: r.Updated.UTC().Format(time.RFC3339Nano),
		TTL:           r.TTL.Milliseconds(),
	}
	if !r.Terminal() {
		w.PollInterval = e.opts.PollInterval.Milliseconds()
	}
	return w
}

func (e *taskEngine) get(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	rec, lt, err := e.lookup(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if extensionRequest(p.Meta) {
		return &extTaskResult{extTask: e.extWire(rec, lt, "complete")}, nil
	}
	out := &taskResult{taskWire: e.wire(rec)}
	if lt != nil {
		lt.mu.Lock()
		msg, n, obs := lt.message, lt.progress, lt.obs
		lt.mu.Unlock()
		if msg != "" {
			out.StatusMessage = msg
		}
		progress := map[string]any{"progress": n, "message": msg}
		if obs != nil {
			_, text := obs.partial()
			if len(text) > maxTextSoFar {
				text = text[len(text)-maxTextSoFar:]
			}
			progress["text"] = text
		}
		out.Meta = mcp.Meta{progressKey: progress}
	}
	return out, nil
}

func (e *taskEngine) result(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	if extensionRequest(p.Meta) {
		return nil, errNotInExtension("tasks/result")
	}
	rec, lt, err := e.lookup(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if lt != nil {
		done := lt.wait(ctx, ss) // the task's questions go on this request's stream
		select {
		case <-lt.done:
		case <-ctx.Done():
		}
		done()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec = lt.snapshot()
	} else if rec, err = e.awaitStored(ctx, rec); err != nil {
		return nil, err
	}
	if rec.Result == nil {
		return nil, &jsonrpc.Error{Code: rec.ErrorCode, Message: rec.ErrorMessage}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's stored result could not be read: " + err.Error()}
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[relatedTaskKey] = map[string]any{"taskId": rec.ID}
	return &res, nil
}

func (e *taskEngine) list(ctx context.Context, _ *mcp.ServerSession, p *taskListParams) (*taskListResult, error) {
	if p != nil && extensionRequest(p.Meta) {
		return nil, errNotInExtension("tasks/list")
	}
	recs, err := e.store.List(ctx, identityFrom(ctx))
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store failed: " + err.Error()}
	}
	start := 0
	if p != nil && p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(recs) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/list: invalid cursor %q: give the nextCursor of the previous page", p.Cursor)}
		}
		start = n
	}
	out := &taskListResult{Tasks: []taskWire{}}
	end := min(start+taskPage, len(recs))
	for _, r := range recs[start:end] {
		if r.Terminal() && time.Since(r.Updated) > r.TTL {
			continue
		}
		e.mu.Lock()
		lt := e.live[r.ID]
		e.mu.Unlock()
		if lt != nil {
			lt.touch()
			r = lt.snapshot()
		} else {
			r = e.expire(ctx, r)
		}
		out.Tasks = append(out.Tasks, e.wire(r))
	}
	if end < len(recs) {
		out.NextCursor = strconv.Itoa(end)
	}
	return out, nil
}

// cancelTask serves tasks/cancel: the run is cancelled with
// ErrTaskCancelled and the answer waits for it to end (its process tree
// killed and reaped), or for the request's own end.
func (e *taskEngine) cancelTask(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
	if extensionRequest(p.Meta) {
		// The extension's cancel is acknowledged, whatever happens to
		// the task.
		_, _ = e.cancel2025(ctx, p)
		return &extAck{ResultType: "complete"}, nil
	}
	return e.cancel2025(ctx, p)
}

// cancel2025 serves the tasks/cancel of MCP 2025-11-25.
func (e *taskEngine) cancel2025(ctx context.Context, p *taskIDParams) (*taskResult, error) {
	rec, lt, err := e.lookup(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if lt != nil {
		lt.mu.Lock()
		if !lt.rec.Terminal() {
			lt.rec.Status, lt.rec.StatusMessage, lt.rec.Updated = TaskCancelled, ErrTaskCancelled.Error(), time.Now()
		} else {
			lt.mu.Unlock()
			return nil, errCancelTerminal(lt.rec.Status)
		}
		lt.mu.Unlock()
		if snap, err := lt.save(ctx); err != nil {
			e.sh.cfg.log.Error("the record of a cancelled task could not be saved", "task", snap.ID, "error", err)
		}
		lt.cancel(ErrTaskCancelled)
		select {
		case <-lt.done:
		case <-ctx.Done():
		}
		return &taskResult{taskWire: e.wire(lt.snapshot())}, nil
	}
	if rec.Terminal() {
		return nil, errCancelTerminal(rec.Status)
	}
	// The task runs in another process sharing the store: the cancel
	// goes through the store, and that process stops the run when it
	// next reports progress (a heartbeat at the latest).
	req := *rec
	req.Status, req.StatusMessage, req.Updated = TaskCancelled, ErrTaskCancelled.Error(), time.Now()
	if err := e.store.Save(ctx, &req); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store failed: " + err.Error()}
	}
	final, err := e.awaitStored(ctx, &req)
	if err != nil {
		return nil, err
	}
	return &taskResult{taskWire: e.wire(final)}, nil
}

// awaitStored waits, polling the store, until the task of rec, which runs
// in another process, has its end recorded, or ctx is done.
func (e *taskEngine) awaitStored(ctx context.Context, rec *TaskRecord) (*TaskRecord, error) {
	for rec.Result == nil && rec.ErrorMessage == "" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(e.opts.PollInterval):
		}
		r, err := e.store.Load(ctx, rec.ID)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"task %s ran in another process of this server, and its record is gone: %v", rec.ID, err)}
		}
		rec = e.expire(ctx, r)
	}
	return rec, nil
}

func errCancelTerminal(status string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status)}
}

// initializeResult is an InitializeResult with the tasks capability of MCP
// 2025-11-25, which the SDK's ServerCapabilities has no field for.
type initializeResult struct{ *mcp.InitializeResult }

func (r *initializeResult) MarshalJSON() ([]byte, error) {
	var m map[string]any
	if err := remarshal(r.InitializeResult, &m); err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		m["capabilities"] = caps
	}
	empty := map[string]any{}
	caps["tasks"] = map[string]any{
		"list":     empty,
		"cancel":   empty,
		"requests": map[string]any{"tools": map[string]any{"call": empty}},
	}
	return json.Marshal(m)
}

// listToolsResult is a ListToolsResult whose tools that take a task say
// so (execution.taskSupport "optional", MCP 2025-11-25), which the SDK's
// Tool has no field for.
type listToolsResult struct {
	*mcp.ListToolsResult
	tasks map[string]bool
}

func (r *listToolsResult) MarshalJSON() ([]byte, error) {
	var m map[string]any
	if err := remarshal(r.ListToolsResult, &m); err != nil {
		return nil, err
	}
	tools, _ := m["tools"].([]any)
	for _, t := range tools {
		if tm, ok := t.(map[string]any); ok {
			if name, _ := tm["name"].(string); r.tasks[name] {
				tm["execution"] = map[string]any{"taskSupport": "optional"}
			}
		}
	}
	return json.Marshal(m)
}

func remarshal(v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// checkRemoteCancel cancels the run when another process sharing the
// store recorded a tasks/cancel of the task.
func (lt *liveTask) checkRemoteCancel(ctx context.Context) {
	r, err := lt.e.store.Load(ctx, lt.rec.ID)
	if err != nil || r.Status != TaskCancelled || r.Result != nil {
		return
	}
	lt.mu.Lock()
	cancelled := lt.rec.Status == TaskCancelled
	if !lt.rec.Terminal() {
		lt.rec.Status, lt.rec.StatusMessage, lt.rec.Updated = TaskCancelled, r.StatusMessage, time.Now()
	}
	lt.mu.Unlock()
	if !cancelled {
		lt.cancel(ErrTaskCancelled)
	}
}

// save saves the task's record as it is when the save's turn comes: the
// saves are serialized, so that the store never goes back to an older
// state of the task.
func (lt *liveTask) save(ctx context.Context) (*TaskRecord, error) {
	lt.saveMu.Lock()
	defer lt.saveMu.Unlock()
	snap := lt.snapshot()
	return snap, lt.e.store.Save(ctx, snap)
}

// renewLease renews the lease of the task's record every third of
// TaskOptions.Lease until the end of its run is recorded, and obeys a
// cancel another replica recorded meanwhile.
func (lt *liveTask) renewLease() {
	t := time.NewTicker(lt.e.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-lt.done:
			return
		case <-t.C:
		}
		ctx := context.Background()
		lt.checkRemoteCancel(ctx)
		lt.saveMu.Lock()
		lt.mu.Lock()
		if lt.ended {
			lt.mu.Unlock()
			lt.saveMu.Unlock()
			return
		}
		lt.rec.LeaseUntil = time.Now().Add(lt.e.opts.Lease)
		snap := lt.rec
		lt.mu.Unlock()
		err := lt.e.store.Save(ctx, &snap)
		lt.saveMu.Unlock()
		if err != nil {
			lt.e.sh.cfg.log.Error("the lease of a running task could not be renewed", "task", snap.ID, "error", err)
		}
	}
}

// expire returns rec, or, when rec is the record of a run whose lease
// passed (the replica running it stopped renewing it), the record of the
// task's failure with ErrTaskReplicaLost, which it saves.
func (e *taskEngine) expire(ctx context.Context, rec *TaskRecord) *TaskRecord {
	now := time.Now()
	if rec.LeaseUntil.IsZero() || now.Before(rec.LeaseUntil) {
		return rec
	}
	msg := fmt.Sprintf("%v (replica %s, lease lapsed at %s)", ErrTaskReplicaLost, rec.Replica, rec.LeaseUntil.UTC().Format(time.RFC3339Nano))
	failed := *rec
	failed.Status, failed.StatusMessage, failed.Updated, failed.LeaseUntil = TaskFailed, msg, now, time.Time{}
	failed.ErrorCode, failed.ErrorMessage = jsonrpc.CodeInternalError, msg
	if err := e.store.Save(ctx, &failed); err != nil {
		e.sh.cfg.log.Error("the record of a task whose replica was lost could not be saved", "task", rec.ID, "error", err)
	}
	e.sh.cfg.log.Warn("task failed: the replica running it stopped renewing its lease", "task", rec.ID, "tool", rec.Tool, "replica", rec.Replica)
	return &failed
}
