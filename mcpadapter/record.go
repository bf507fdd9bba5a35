package mcpadapter

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// newRunID returns the id that pairs a run's transcript lines.
func newRunID() string { return rand.Text()[:16] }

// entry returns the transcript entry of a run of req.
func (t *tool) entry(toolName string, index *int, runID string, req *invoker.Request) *TranscriptEntry {
	return &TranscriptEntry{
		Time:            time.Now(),
		Run:             runID,
		Tool:            toolName,
		CLI:             t.name,
		Task:            index,
		Prompt:          req.Prompt,
		Workdir:         req.Workdir,
		Permission:      req.Permission,
		Model:           req.Model,
		ResumeSessionID: req.SessionID,
		Fork:            req.Fork,
		SystemPrompt:    req.SystemPrompt,
		Images:          req.Images,
	}
}

// recordStart writes the transcript line of a run whose session id just
// became known, so that the session can be resumed even if the server is
// killed before the run ends.
func (t *tool) recordStart(ctx context.Context, toolName string, index *int, runID string, req *invoker.Request, sessionID string, start time.Time) {
	e := t.entry(toolName, index, runID, req)
	e.Identity = identityFrom(ctx)
	e.Output = Output{Status: StatusRunning, SessionID: sessionID, ExitCode: -1, DurationMS: time.Since(start).Milliseconds()}
	if err := t.tr.append(e); err != nil {
		t.cfg.log.ErrorContext(ctx, "transcript write failed", "tool", toolName, "error", err)
	}
	attrs := []any{"tool", toolName, "session_id", sessionID}
	if index != nil {
		attrs = append(attrs, "task", *index)
	}
	t.cfg.log.InfoContext(ctx, "run has a session", logAttrs(ctx, attrs...)...)
}

// record writes the transcript line and the log record of a finished (or
// refused) run. runID is empty for a call refused before any run.
func (t *tool) record(ctx context.Context, toolName string, index *int, runID string, req *invoker.Request, res *invoker.Result, out Output, start time.Time) {
	e := t.entry(toolName, index, runID, req)
	e.Identity = identityFrom(ctx)
	e.Output = out
	if res != nil {
		e.Stderr = res.Stderr
	}
	if err := t.tr.append(e); err != nil {
		t.cfg.log.ErrorContext(ctx, "transcript write failed", "tool", toolName, "error", err)
	}
	attrs := []any{"tool", toolName, "status", out.Status, "session_id", out.SessionID,
		"exit_code", out.ExitCode, "duration", time.Since(start).Round(time.Millisecond)}
	if index != nil {
		attrs = append(attrs, "task", *index)
	}
	if out.Error != "" {
		attrs = append(attrs, "error", out.Error)
	}
	t.cfg.log.InfoContext(ctx, "run finished", logAttrs(ctx, attrs...)...)
}
