package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/clinvoke/clinvoke/invoker"
)

// The values of Output.Status.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	StatusRefused   = "refused"
)

// bind returns the context of one call: done when the call's own context
// is done (the client cancelled, the connection closed) or when the
// server's lifetime (Options.Context) ends, with errServerStopping as the
// cause.
func (c *config) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if c.ctx.Err() != nil {
		// AfterFunc would run its function in a goroutine of its own: a
		// call arriving after the shutdown must see it at once.
		cancel(errServerStopping)
	}
	stop := context.AfterFunc(c.ctx, func() { cancel(errServerStopping) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// reporter starts the progress reporter of a call, or returns nil when the
// client gave no progress token.
func (t *tool) reporter(ctx context.Context, req *mcp.CallToolRequest) *reporter {
	if req == nil || req.Params == nil || req.Session == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	ss := req.Session
	notify := func(ctx context.Context, msg string, progress float64) error {
		return ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Message:       msg,
			Progress:      progress,
		})
	}
	return startReporter(ctx, notify, t.cfg.progressEvery, t.cfg.heartbeat, func(err error) {
		t.cfg.log.Debug("progress notification failed", "tool", req.Params.Name, "error", err)
	})
}

// handle serves the single-run tool.
func (t *tool) handle(ctx context.Context, req *mcp.CallToolRequest, in Input) (res *mcp.CallToolResult, out Output, err error) {
	defer func() {
		// A panic here is a bug of this package (the invoker's own panics
		// are recovered in invoke); the server must survive it all the same.
		if v := recover(); v != nil {
			t.cfg.log.Error("tool handler panicked", "tool", t.name, "panic", v, "stack", string(debug.Stack()))
			out = Output{Status: StatusFailed, ExitCode: -1, Error: fmt.Sprintf("internal error in the %s tool: %v", t.name, v)}
			res, err = errorResult(t.name, out), nil
		}
	}()
	if t.cfg.ctx.Err() != nil {
		out = t.refuse(t.name, nil, in, errShutdownRefusal)
		return errorResult(t.name, out), out, nil
	}
	ctx, cancel := t.cfg.bind(ctx)
	defer cancel()
	rep := t.reporter(ctx, req)
	defer rep.stop()

	out = t.runTask(ctx, rep, t.name, "", nil, in)
	if out.Status != StatusCompleted {
		return errorResult(t.name, out), out, nil
	}
	return &mcp.CallToolResult{}, out, nil
}

// errorResult returns the isError result of a run that did not complete:
// a sentence saying what happened and how to resume, then the structured
// output as JSON (the fallback the MCP spec asks for, for clients that
// ignore structured content).
func errorResult(name string, out any) *mcp.CallToolResult {
	var msg string
	switch o := out.(type) {
	case Output:
		msg = errorSentence(name, o)
	case ParallelOutput:
		msg = fmt.Sprintf("No %s task completed (%d failed, %d cancelled); see results for each task's error, partial text and session_id.",
			name, o.Failed, o.Cancelled)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if js, err := json.Marshal(out); err == nil {
		res.Content = append(res.Content, &mcp.TextContent{Text: string(js)})
	}
	res.SetError(errors.New(msg))
	return res
}

func errorSentence(name string, o Output) string {
	var b strings.Builder
	switch o.Status {
	case StatusRefused:
		fmt.Fprintf(&b, "%s call refused, nothing was started: %s", name, o.Error)
		return b.String()
	case StatusCancelled:
		fmt.Fprintf(&b, "%s run cancelled: %s", name, o.Error)
	default:
		fmt.Fprintf(&b, "%s run failed: %s", name, o.Error)
	}
	if o.DurationMS > 0 {
		fmt.Fprintf(&b, " (after %s)", (time.Duration(o.DurationMS) * time.Millisecond).Round(100*time.Millisecond))
	}
	b.WriteString(".")
	if o.Resume != "" {
		b.WriteString(" " + o.Resume)
	}
	if o.Text != "" {
		b.WriteString(" The partial answer is in the text field below.")
	}
	return b.String()
}

// handleParallel serves the parallel tool.
func (t *tool) handleParallel(ctx context.Context, req *mcp.CallToolRequest, in ParallelInput) (res *mcp.CallToolResult, out ParallelOutput, err error) {
	toolName := t.name + ParallelSuffix
	defer func() {
		if v := recover(); v != nil {
			t.cfg.log.Error("tool handler panicked", "tool", toolName, "panic", v, "stack", string(debug.Stack()))
			res = &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("internal error in the %s tool: %v", toolName, v))
			out, err = ParallelOutput{Results: []TaskOutput{}}, nil
		}
	}()
	start := time.Now()
	// The input schema bounds the number of tasks too; this check is for
	// calls that bypass it.
	if len(in.Tasks) == 0 || len(in.Tasks) > t.cfg.maxTasks {
		res, out = t.refuseParallel(toolName, in, start, refusef("give 1 to %d tasks (got %d)", t.cfg.maxTasks, len(in.Tasks)))
		return res, out, nil
	}
	if t.cfg.ctx.Err() != nil {
		res, out = t.refuseParallel(toolName, in, start, errShutdownRefusal)
		return res, out, nil
	}
	ctx, cancel := t.cfg.bind(ctx)
	defer cancel()

	out.Results = make([]TaskOutput, len(in.Tasks))

	rep := t.reporter(ctx, req)
	defer rep.stop()

	limit := len(in.Tasks)
	if in.MaxParallel > 0 {
		limit = min(limit, in.MaxParallel)
	}
	limit = int(min(int64(limit), t.cfg.maxConcurrent))
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
			o := t.runTask(gctx, rep, toolName, fmt.Sprintf("[%d] ", i), &i, task)
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

// errShutdownRefusal refuses the calls that arrive once Options.Context is
// done. Runs in flight at that moment are cancelled instead.
var errShutdownRefusal = refusef("the server is shutting down")

// refuse answers a call refused before anything started and records it.
func (t *tool) refuse(toolName string, index *int, in Input, err error) Output {
	req := requestOf(in)
	out := Output{Status: StatusRefused, ExitCode: -1, Error: strings.TrimPrefix(err.Error(), errRefused.Error()+": ")}
	t.record(toolName, index, &req, nil, out, time.Now())
	return out
}

// refuseParallel answers a parallel call refused as a whole before any
// task started: an isError result with an empty results list. It records
// one transcript entry, with the call's defaults as the request.
func (t *tool) refuseParallel(toolName string, in ParallelInput, start time.Time, err error) (*mcp.CallToolResult, ParallelOutput) {
	msg := strings.TrimPrefix(err.Error(), errRefused.Error()+": ")
	req := invoker.Request{Workdir: in.Workdir, Permission: invoker.Permission(in.Permission), Model: in.Model, SystemPrompt: in.SystemPrompt}
	t.record(toolName, nil, &req, nil, Output{Status: StatusRefused, ExitCode: -1, Error: msg}, start)
	out := ParallelOutput{Results: []TaskOutput{}, DurationMS: time.Since(start).Milliseconds()}
	res := &mcp.CallToolResult{}
	res.SetError(fmt.Errorf("%s call refused, nothing was started: %s", toolName, msg))
	return res, out
}

// requestOf returns the Request in asks for, unchecked: what a refused
// call's transcript entry records.
func requestOf(in Input) invoker.Request {
	return invoker.Request{Prompt: in.Prompt, Workdir: in.Workdir, Permission: invoker.Permission(in.Permission),
		Model: in.Model, SessionID: in.SessionID, SystemPrompt: in.SystemPrompt, Images: in.Images,
		OutputSchema: in.OutputSchema, MaxTurns: in.MaxTurns, MaxBudgetUSD: in.MaxBudgetUSD}
}

// runTask runs one agent turn for in and reports it: validation, a slot of
// the semaphore, the run itself, the transcript line and the log record.
// It never panics and always returns a filled Output.
func (t *tool) runTask(ctx context.Context, rep *reporter, toolName, prefix string, index *int, in Input) (out Output) {
	var (
		req   invoker.Request
		res   *invoker.Result
		err   error
		start = time.Now()
	)
	defer func() {
		if v := recover(); v != nil { // a bug of this package: keep serving
			t.cfg.log.Error("run panicked", "tool", toolName, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: %v", v)
			out = t.output(ctx, res, err)
		}
		t.record(toolName, index, &req, res, out, start)
	}()

	req, err = t.request(in)
	if err != nil {
		req = requestOf(in) // record what was asked for
		return t.output(ctx, nil, err)
	}
	if err := ctx.Err(); err != nil {
		return t.output(ctx, nil, fmt.Errorf("not started: %w", err))
	}
	if !t.sem.TryAcquire(1) {
		rep.post(prefix + "queued: waiting for a free slot")
		if err := t.sem.Acquire(ctx, 1); err != nil {
			return t.output(ctx, nil, fmt.Errorf("not started, still waiting for a free slot: %w", err))
		}
	}
	defer t.sem.Release(1)

	obs := &observer{prefix: prefix, rep: rep}
	req.OnEvent = obs.onEvent
	rep.post(prefix + "starting " + t.name)
	t.cfg.log.Info("run starting", "tool", toolName, "workdir", req.Workdir, "permission", req.Permission, "resume", req.SessionID)
	res, err = t.invoke(ctx, req)
	if res == nil { // the invoker panicked or broke its contract
		sid, text := obs.partial()
		res = &invoker.Result{SessionID: sid, Text: text, ExitCode: -1, Duration: time.Since(start)}
	}
	return t.output(ctx, res, err)
}

// invoke calls the invoker, turning a panic into an error: a panic in a
// handler goroutine would otherwise end the whole server process.
func (t *tool) invoke(ctx context.Context, req invoker.Request) (res *invoker.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			t.cfg.log.Error("invoker panicked", "cli", t.name, "panic", v, "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("internal error: the %s invoker panicked: %v", t.name, v)
		}
	}()
	return t.inv.Invoke(ctx, req)
}

// request checks in against the configuration and returns the Request to
// run. Its errors wrap errRefused.
func (t *tool) request(in Input) (invoker.Request, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return invoker.Request{}, refusef("prompt is empty")
	}
	perm := invoker.Permission(in.Permission)
	if perm == "" {
		perm = t.cfg.defaultPerm
	}
	if !perm.Valid() {
		return invoker.Request{}, refusef("unknown permission %q (want one of %v)", perm, t.cfg.allowedPermissions())
	}
	if perm.Rank() > t.cfg.maxPerm.Rank() {
		return invoker.Request{}, refusef("permission %q is above this server's limit %q", perm, t.cfg.maxPerm)
	}
	if err := checkSessionID(in.SessionID); err != nil {
		return invoker.Request{}, err
	}
	wd, err := t.cfg.checkWorkdir(in.Workdir)
	if err != nil {
		return invoker.Request{}, err
	}
	if len(in.Images) > 0 && !t.f.images {
		return invoker.Request{}, refusef("%s takes no image files", t.name)
	}
	if in.SystemPrompt != "" && !t.f.systemPrompt {
		return invoker.Request{}, refusef("%s takes no system prompt", t.name)
	}
	var images []string
	for _, p := range in.Images {
		img, err := t.cfg.checkImage(wd, p)
		if err != nil {
			return invoker.Request{}, err
		}
		images = append(images, img)
	}
	lim, err := t.limits(in)
	if err != nil {
		return invoker.Request{}, err
	}
	return invoker.Request{
		Prompt:       in.Prompt,
		Workdir:      wd,
		Permission:   perm,
		Model:        in.Model,
		SessionID:    in.SessionID,
		SystemPrompt: in.SystemPrompt,
		Images:       images,
		OutputSchema: lim.schema,
		MaxTurns:     lim.turns,
		MaxBudgetUSD: lim.budget,
	}, nil
}

// output turns a run's outcome into an Output. res may be nil when
// nothing was started.
func (t *tool) output(ctx context.Context, res *invoker.Result, err error) Output {
	out := Output{Status: StatusCompleted, ExitCode: -1}
	if res != nil {
		out.Text = res.Text
		out.SessionID = res.SessionID
		out.ExitCode = res.ExitCode
		out.DurationMS = res.Duration.Milliseconds()
		out.Usage = res.Usage
		setStructured(&out, res)
	}
	if err == nil {
		return out
	}
	switch {
	case errors.Is(err, errRefused) || errors.Is(err, invoker.ErrInvalidRequest):
		// The invoker checks requests before starting anything too.
		out.Status = StatusRefused
		out.Error = strings.TrimPrefix(err.Error(), errRefused.Error()+": ")
	case ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx))):
		out.Status = StatusCancelled
		out.Error = cancelReason(ctx, err)
	default:
		out.Status = StatusFailed
		out.Error = err.Error()
	}
	if out.SessionID != "" && out.Status != StatusRefused {
		out.Resume = fmt.Sprintf("To continue this session, call %s again with session_id %q and the same workdir.", t.name, out.SessionID)
	}
	return out
}

// cancelReason says who cancelled a run.
func cancelReason(ctx context.Context, err error) string {
	cause := context.Cause(ctx)
	var sibling *siblingFailed
	switch {
	case errors.Is(cause, errServerStopping):
		return "the server is shutting down"
	case errors.As(cause, &sibling):
		return sibling.Error()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded):
		return "the deadline passed"
	case errors.Is(cause, io.EOF) || errors.Is(cause, io.ErrClosedPipe) || errors.Is(cause, net.ErrClosed):
		// The SDK cancels the calls of a connection that ended with the
		// read error as the cause.
		return "the client's connection closed"
	case cause == nil || errors.Is(cause, context.Canceled):
		return "cancelled by the client"
	}
	return "cancelled: " + cause.Error()
}

// siblingFailed is the cancellation cause of the tasks of a fail_fast
// parallel call after one of them failed.
type siblingFailed struct {
	index  int
	status string
}

func (e *siblingFailed) Error() string {
	return fmt.Sprintf("task %d %s and fail_fast is set", e.index, e.status)
}

// Is makes the cause match context.Canceled, like errServerStopping.
func (e *siblingFailed) Is(target error) bool { return target == context.Canceled }

// record writes the transcript line and the log record of a finished run.
func (t *tool) record(toolName string, index *int, req *invoker.Request, res *invoker.Result, out Output, start time.Time) {
	e := &TranscriptEntry{
		Time:         time.Now(),
		Tool:         toolName,
		CLI:          t.name,
		Task:         index,
		Prompt:       req.Prompt,
		Workdir:      req.Workdir,
		Permission:   req.Permission,
		Model:        req.Model,
		Resume:       req.SessionID,
		SystemPrompt: req.SystemPrompt,
		Images:       req.Images,
		Status:       out.Status,
		Text:         out.Text,
		SessionID:    out.SessionID,
		ExitCode:     out.ExitCode,
		DurationMS:   out.DurationMS,
		Usage:        out.Usage,
		Error:        out.Error,
	}
	if res != nil {
		e.Stderr = res.Stderr
	}
	if err := t.tr.append(e); err != nil {
		t.cfg.log.Error("transcript write failed", "tool", toolName, "error", err)
	}
	attrs := []any{"tool", toolName, "status", out.Status, "session_id", out.SessionID,
		"exit_code", out.ExitCode, "duration", time.Since(start).Round(time.Millisecond)}
	if index != nil {
		attrs = append(attrs, "task", *index)
	}
	if out.Error != "" {
		attrs = append(attrs, "error", out.Error)
	}
	t.cfg.log.Info("run finished", attrs...)
}
