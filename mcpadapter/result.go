package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

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
		out.Resources = res.Resources
		out.QueuedMS = res.Queued.Milliseconds()
		out.Sandbox = res.Sandbox
		out.Connections = connections(res.Connections)
		setStructured(&out, res)
	}
	if err == nil {
		return out
	}
	switch {
	case errors.Is(err, errRefused) || errors.Is(err, invoker.ErrInvalidRequest):
		// The invoker checks requests before starting anything too.
		out.Status = StatusRefused
		out.Error = reasonOf(err)
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

// cancelReason says who cancelled a run, from the cause of ctx.
func cancelReason(ctx context.Context, err error) string {
	cause := context.Cause(ctx)
	var (
		sibling *siblingFailed
		known   *cancelCause
	)
	switch {
	case errors.As(cause, &known): // ErrShuttingDown, ErrClientGone
		return known.Error()
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

// refuseParallel answers a parallel call refused as a whole before any
// task started: an isError result with an empty results list. It records
// one transcript entry, with the call's defaults as the request.
func (t *tool) refuseParallel(ctx context.Context, toolName string, in ParallelInput, start time.Time, err error) (*mcp.CallToolResult, ParallelOutput) {
	msg := reasonOf(err)
	req := invoker.Request{Workdir: in.Workdir, Permission: invoker.Permission(in.Permission), Model: in.Model, SystemPrompt: in.SystemPrompt}
	t.record(ctx, toolName, nil, "", &req, nil, Output{Status: StatusRefused, ExitCode: -1, Error: msg}, start)
	out := ParallelOutput{Results: []TaskOutput{}, DurationMS: time.Since(start).Milliseconds()}
	res := &mcp.CallToolResult{}
	res.SetError(fmt.Errorf("%s call refused, nothing was started: %s", toolName, msg))
	return res, out
}
