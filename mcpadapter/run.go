package mcpadapter

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

// runTask runs one agent turn for in and reports it: validation, a slot of
// the semaphore, the run itself, the transcript lines and the log records.
// creq is the client's request (nil in tests that call no client), whose
// session approval questions go to under ApprovalsElicit. It never panics
// and always returns a filled Output.
func (t *tool) runTask(ctx context.Context, rep *reporter, creq *mcp.CallToolRequest, toolName, prefix string, index *int, in Input) (out Output) {
	var (
		req   invoker.Request
		res   *invoker.Result
		err   error
		start = time.Now()
		runID = newRunID()
	)
	defer func() {
		if v := recover(); v != nil { // a bug of this package: keep serving
			t.cfg.log.ErrorContext(ctx, "run panicked", logAttrs(ctx, "tool", toolName, "panic", v, "stack", string(debug.Stack()))...)
			err = fmt.Errorf("internal error: %v", v)
			out = t.output(ctx, res, err)
		}
		t.record(ctx, toolName, index, runID, &req, res, out, start)
	}()

	req, err = t.request(in)
	if err != nil {
		req = requestOf(in) // record what was asked for
		return t.output(ctx, nil, err)
	}
	if err = t.owners.check(req.SessionID, identityFrom(ctx)); err != nil {
		return t.output(ctx, nil, err)
	}
	if err := ctx.Err(); err != nil {
		return t.output(ctx, nil, fmt.Errorf("not started: %w", err))
	}
	// The identity's slot first, so that a call waiting behind its own
	// identity's runs holds no slot that another identity's call could use
	// (admission.go).
	release, waited, err := t.slots.acquire(ctx, identityFrom(ctx), func(ev invoker.Event) { rep.post(prefix + ev.Text) })
	if err != nil {
		return t.output(ctx, nil, err)
	}
	defer release()

	obs := &observer{prefix: prefix, rep: rep, onSession: func(sid string) {
		t.owners.claim(sid, identityFrom(ctx))
		t.recordStart(ctx, toolName, index, runID, &req, sid, start)
	}}
	req.OnEvent = obs.onEvent
	if task := taskOf(ctx); task != nil && index == nil {
		task.observe(obs) // tasks/get shows the text so far
	}
	if a := t.approverFor(ctx, newCall(ctx, toolName, index, creq, req), rep, prefix); a != nil {
		req.Approve = a.approve
	}
	rep.post(prefix + "starting " + t.name)
	t.cfg.log.InfoContext(ctx, "run starting", logAttrs(ctx, "tool", toolName, "workdir", req.Workdir, "permission", req.Permission, "resume", req.SessionID)...)
	res, err = t.call(ctx, req, index == nil)
	if res == nil { // the invoker panicked or broke its contract
		sid, text := obs.partial()
		res = &invoker.Result{SessionID: sid, Text: text, ExitCode: -1, Duration: time.Since(start)}
	}
	t.owners.claim(res.SessionID, identityFrom(ctx))
	res.Queued += waited // the call's waits, then its run's for the Budget
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
