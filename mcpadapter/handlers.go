package mcpadapter

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"
)

// handle serves the single-run tool.
func (t *tool) handle(ctx context.Context, req *mcp.CallToolRequest, in Input) (res *mcp.CallToolResult, out Output, err error) {
	// The call counts until everything below, its record included, is
	// done: deferred first, end runs last.
	ctx, end := t.calls.begin(ctx, req, t.name)
	defer end()
	ctx, endSpan := t.startCall(ctx, req, t.name)
	defer func() { endSpan(out.Status, out.Error) }()
	defer func() {
		// A panic here is a bug of this package (the invoker's own panics
		// are recovered in invoke); the server must survive it all the same.
		if v := recover(); v != nil {
			t.cfg.log.ErrorContext(ctx, "tool handler panicked", logAttrs(ctx, "tool", t.name, "panic", v, "stack", string(debug.Stack()))...)
			out = Output{Status: StatusFailed, ExitCode: -1, Error: fmt.Sprintf("internal error in the %s tool: %v", t.name, v)}
			res, err = errorResult(t.name, out), nil
		}
	}()
	if t.shuttingDown() {
		out = t.refuse(ctx, t.name, nil, in, errShutdownRefusal)
		return errorResult(t.name, out), out, nil
	}
	ctx, cancel := t.bind(ctx)
	defer cancel()
	rep := t.reporter(ctx, req)
	defer rep.stop()

	out = t.runTask(ctx, rep, req, t.name, "", nil, in)
	if out.Status != StatusCompleted {
		return errorResult(t.name, out), out, nil
	}
	return &mcp.CallToolResult{}, out, nil
}

// handleParallel serves the parallel tool.
func (t *tool) handleParallel(ctx context.Context, req *mcp.CallToolRequest, in ParallelInput) (res *mcp.CallToolResult, out ParallelOutput, err error) {
	toolName := t.name + ParallelSuffix
	ctx, end := t.calls.begin(ctx, req, toolName)
	defer end()
	ctx, endSpan := t.startCall(ctx, req, toolName)
	defer func() {
		if res == nil || res.IsError {
			endSpan(StatusFailed, fmt.Sprintf("%d of %d tasks completed", out.Completed, len(in.Tasks)))
			return
		}
		endSpan(StatusCompleted, "")
	}()
	defer func() {
		if v := recover(); v != nil {
			t.cfg.log.ErrorContext(ctx, "tool handler panicked", logAttrs(ctx, "tool", toolName, "panic", v, "stack", string(debug.Stack()))...)
			res = &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("internal error in the %s tool: %v", toolName, v))
			out, err = ParallelOutput{Results: []TaskOutput{}}, nil
		}
	}()
	start := time.Now()
	// The input schema bounds the number of tasks too; this check is for
	// calls that bypass it.
	if len(in.Tasks) == 0 || len(in.Tasks) > t.cfg.maxTasks {
		res, out = t.refuseParallel(ctx, toolName, in, start, refusef("give 1 to %d tasks (got %d)", t.cfg.maxTasks, len(in.Tasks)))
		return res, out, nil
	}
	if t.shuttingDown() {
		res, out = t.refuseParallel(ctx, toolName, in, start, errShutdownRefusal)
		return res, out, nil
	}
	ctx, cancel := t.bind(ctx)
	defer cancel()

	out.Results = make([]TaskOutput, len(in.Tasks))

	rep := t.reporter(ctx, req)
	defer rep.stop()

	limit := len(in.Tasks)
	if in.MaxParallel > 0 {
		limit = min(limit, in.MaxParallel)
	}
	limit = int(min(int64(limit), t.cfg.maxConcurrent))
	if id := identityFrom(ctx); id != "" && t.cfg.maxPerIdentity > 0 {
		limit = int(min(int64(limit), t.cfg.maxPerIdentity))
	}
	var (
		g    *errgroup.Group
		gctx = ctx
	)
	if in.FailFast {
		// The first failed task's error cancels gctx: the tasks running
		// are stopped (their trees killed) and those not started yet
		// end as cancelled without starting.
		g, gctx = errgroup.WithContext(ctx)
	} else {
		g = new(errgroup.Group) // a failure cancels nothing
	}
	g.SetLimit(limit)
	var finished atomic.Int64
	for i, task := range in.Tasks {
		if task.Workdir == "" {
			task.Workdir = in.Workdir
		}
		if task.Permission == "" {
			task.Permission = in.Permission
		}
		if task.Model == "" {
			task.Model = in.Model
		}
		if task.SystemPrompt == "" {
			task.SystemPrompt = in.SystemPrompt
		}
		g.Go(func() error {
			o := t.runTask(gctx, rep, req, toolName, fmt.Sprintf("[%d] ", i), &i, task)
			out.Results[i] = TaskOutput{Index: i, Output: o}
			rep.post(fmt.Sprintf("[%d] %s (%d/%d tasks done)", i, o.Status, finished.Add(1), len(in.Tasks)))
			if in.FailFast && o.Status != StatusCompleted {
				return &siblingFailed{index: i, status: o.Status}
			}
			return nil
		})
	}
	_ = g.Wait() // each task's error is in its result
	for _, r := range out.Results {
		switch r.Status {
		case StatusCompleted:
			out.Completed++
		case StatusCancelled:
			out.Cancelled++
		default:
			out.Failed++
		}
	}
	out.DurationMS = time.Since(start).Milliseconds()
	if out.Completed == 0 {
		return errorResult(toolName, out), out, nil
	}
	return &mcp.CallToolResult{}, out, nil
}

// sessionOf returns the client session of a call, or nil.
func sessionOf(req *mcp.CallToolRequest) *mcp.ServerSession {
	if req == nil {
		return nil
	}
	return req.Session
}

// reporter starts the progress reporter of a call, or returns nil when the
// client gave no progress token and the call is no task's run (whose
// progress tasks/get shows).
func (t *tool) reporter(ctx context.Context, req *mcp.CallToolRequest) *reporter {
	if req == nil || req.Params == nil {
		return nil
	}
	var notify notifyFunc
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		ss := req.Session
		notify = func(ctx context.Context, msg string, progress float64) error {
			return ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Message:       msg,
				Progress:      progress,
			})
		}
	}
	if task := taskOf(ctx); task != nil {
		notify = task.notify(notify) // tasks/get shows the progress
	}
	return startReporter(ctx, notify, t.cfg.progressEvery, t.cfg.heartbeat, func(err error) {
		t.cfg.log.Debug("progress notification failed", "tool", req.Params.Name, "error", err)
	})
}
