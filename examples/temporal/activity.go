// Package agentflow runs agent turns as Temporal activities: RunTurn runs one
// turn of any clinvoke backend under the activity's context, and FanOut is a
// workflow that runs many turns with a concurrency bound, failing fast or
// collecting every result.
//
// The activity maps clinvoke's guarantees onto Temporal's model:
//
//   - Cancellation. Temporal delivers an activity's cancel through its
//     heartbeats, so RunTurn heartbeats on a ticker (Activities.HeartbeatEvery)
//     whether or not the agent speaks. The cancel becomes a cancel of the
//     turn's context, which stops the CLI with clinvoke's ladder; RunTurn
//     returns only once the CLI's tree is gone, with a *temporal.CanceledError
//     whose details are the last Progress (session id, partial answer).
//   - Retries. Errors become Temporal application errors whose type names the
//     cause (see the ErrorType constants) and which are retryable or not as
//     the cause says (see Classify).
//   - A worker that dies. The run's tree dies with it (cgroup containment's
//     keeper), the heartbeat timeout fires, and the next attempt, on any
//     worker, resumes the conversation from the last heartbeat's session id
//     where the CLI can resume (invoker.Capabilities.Resume).
package agentflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/clinvoke/clinvoke/invoker"
)

// TurnInput is one agent turn: which CLI runs it, and the fields of its
// invoker.Request (see there for what each means).
type TurnInput struct {
	// CLI names the backend: a key of Activities.Invokers ("codex",
	// "gemini", "claude").
	CLI string

	Prompt       string
	Workdir      string
	Permission   invoker.Permission `json:",omitempty"`
	Model        string             `json:",omitempty"`
	SessionID    string             `json:",omitempty"`
	SystemPrompt string             `json:",omitempty"`
	Env          []string           `json:",omitempty"`
	OutputSchema json.RawMessage    `json:",omitempty"`
	MaxTurns     int                `json:",omitempty"`
	MaxBudgetUSD float64            `json:",omitempty"`

	// ResumePrompt is the prompt of an attempt that resumes the session an
	// earlier attempt of the same turn started (the worker died, say); empty
	// means Prompt again. The CLI's transcript already holds the earlier
	// attempt's work, so a prompt such as "Go on where you stopped" can
	// save it from redoing it.
	ResumePrompt string `json:",omitempty"`
}

// TurnOutput is what a completed turn produced.
type TurnOutput struct {
	SessionID   string
	Text        string
	Structured  json.RawMessage `json:",omitempty"`
	Usage       invoker.Usage
	Turns       int           `json:",omitempty"`
	Duration    time.Duration // the turn's run, start to the reaping of its tree
	Containment string
	// Sandbox is the sandbox that held the turn's processes
	// (invoker.Result.Sandbox): "filesystem", "filesystem,network", or
	// "" for none (see SandboxOf).
	Sandbox string

	// Attempt is the activity attempt that completed the turn (1 for the
	// first), and Resumed says that it resumed the session of an earlier
	// attempt. Worker is the Activities.Worker that ran it.
	Attempt int32
	Resumed bool
	Worker  string
}

// Progress is the heartbeat of a running turn, and the details of a cancelled
// or failed one: enough to see what the agent is doing and to resume it.
type Progress struct {
	// SessionID is the session the CLI reported ("" before it did).
	SessionID string `json:",omitempty"`
	// Kind and Text are the latest event's kind and (truncated) text.
	Kind string `json:",omitempty"`
	Text string `json:",omitempty"`
	// Events counts the turn's events so far.
	Events int
	// Partial is the answer so far: streamed message text, truncated to
	// the last MaxPartial bytes.
	Partial string `json:",omitempty"`
	// Attempt and Worker say which attempt, on which worker, reported.
	Attempt int32
	Worker  string `json:",omitempty"`
	// GoneAt, on the details of a cancelled turn, is when clinvoke
	// reported the CLI's tree gone (just before the activity reported
	// the cancel).
	GoneAt time.Time `json:",omitzero"`
}

// MaxPartial bounds the text a heartbeat carries: heartbeat details travel to
// the Temporal server every few seconds and are stored with the activity.
const MaxPartial = 16 << 10

// Activities holds the invokers the RunTurn activity runs turns with. Register
// a *Activities with a worker (see Register).
type Activities struct {
	// Invokers maps TurnInput.CLI to the Invoker that runs it.
	Invokers map[string]invoker.Invoker
	// HeartbeatEvery is how often RunTurn heartbeats while the agent is
	// silent; zero means 1 s. The SDK sends at most one heartbeat per
	// throttle interval (worker.Options.MaxHeartbeatThrottleInterval, and
	// 0.8 × the activity's HeartbeatTimeout), and a cancel reaches the
	// activity in the response to one: the delay from a workflow cancel to
	// the turn's context is at most about one throttle interval.
	HeartbeatEvery time.Duration
	// Worker names this worker in Progress and TurnOutput.
	Worker string
}

// RunTurn runs one agent turn. It is the activity: register it through
// Register, or with the name RunTurnActivity.
func (a *Activities) RunTurn(ctx context.Context, in TurnInput) (*TurnOutput, error) {
	info := activity.GetInfo(ctx)
	inv, ok := a.Invokers[in.CLI]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no invoker for CLI %q on worker %s", in.CLI, a.Worker), ErrorTypeInvalidRequest, nil)
	}
	req := invoker.Request{
		Prompt:       in.Prompt,
		Workdir:      in.Workdir,
		Permission:   in.Permission,
		Model:        in.Model,
		SessionID:    in.SessionID,
		SystemPrompt: in.SystemPrompt,
		Env:          in.Env,
		OutputSchema: in.OutputSchema,
		MaxTurns:     in.MaxTurns,
		MaxBudgetUSD: in.MaxBudgetUSD,
		// The heartbeats carry the answer as it is written, where the CLI
		// can stream it.
		Deltas: inv.Capabilities().Deltas,
	}

	// An earlier attempt that got as far as a session id left it in its
	// heartbeat: go on in that conversation rather than start over.
	resumed := false
	if activity.HasHeartbeatDetails(ctx) {
		var last Progress
		if err := activity.GetHeartbeatDetails(ctx, &last); err == nil &&
			last.SessionID != "" && inv.Capabilities().Resume {
			req.SessionID = last.SessionID
			resumed = true
			if in.ResumePrompt != "" {
				req.Prompt = in.ResumePrompt
			}
		}
	}

	p := &progress{Progress: Progress{SessionID: req.SessionID, Attempt: info.Attempt, Worker: a.Worker}}
	nudge := make(chan struct{}, 1)
	req.OnEvent = func(ev invoker.Event) {
		if p.update(ev) { // a new session id: tell the server at once
			select {
			case nudge <- struct{}{}:
			default:
			}
		}
	}

	every := a.HeartbeatEvery
	if every <= 0 {
		every = time.Second
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// One goroutine heartbeats, on a ticker while the agent is silent
		// (a cancel arrives only in a heartbeat's response) and at once
		// when the session id is known.
		t := time.NewTicker(every)
		defer t.Stop()
		activity.RecordHeartbeat(ctx, p.snapshot())
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			case <-nudge:
			}
			activity.RecordHeartbeat(ctx, p.snapshot())
		}
	})

	res, err := inv.Invoke(ctx, req)
	close(stop)
	wg.Wait()
	// Invoke has returned: the CLI and every process it started are gone.

	p.finish(res)
	if err == nil {
		return &TurnOutput{
			SessionID:   res.SessionID,
			Text:        res.Text,
			Structured:  res.Structured,
			Usage:       res.Usage,
			Turns:       res.Turns,
			Duration:    res.Duration,
			Containment: res.Containment,
			Sandbox:     res.Sandbox,
			Attempt:     info.Attempt,
			Resumed:     resumed,
			Worker:      a.Worker,
		}, nil
	}
	last := p.snapshot()
	if resumed && res.SessionID == "" {
		// The CLI did not take the session up: it may keep its sessions
		// in the user's home, and this worker's home has not got it. The
		// next attempt starts over rather than fail the same way.
		last.SessionID = ""
	}
	// The last heartbeat is what the next attempt resumes from: record the
	// final state (the SDK sends a buffered heartbeat of an activity that
	// did not succeed).
	activity.RecordHeartbeat(ctx, last)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Stopped by the activity's context. The tree is gone; say when.
		last.GoneAt = time.Now()
		if cancelledByServer(ctx) {
			return nil, temporal.NewCanceledError(last)
		}
		if errors.Is(err, context.Canceled) {
			// The worker is stopping (past WorkerStopTimeout), or the
			// activity was paused: not a cancel of the turn. Another
			// attempt resumes the session from the last heartbeat.
			return nil, temporal.NewApplicationErrorWithOptions(err.Error(), ErrorTypeWorkerStopped,
				temporal.ApplicationErrorOptions{Details: []any{last}})
		}
	}
	return nil, Classify(err, last)
}

// cancelledByServer reports whether ctx was cancelled because the turn was:
// the SDK cancels it with a *temporal.CanceledError as its cause when a
// heartbeat's response says so, and with serviceerror.NotFound when the
// server no longer knows the activity (its workflow ended, say; the SDK's
// test environment cancels this way too). A worker that stops cancels it
// with another cause.
func cancelledByServer(ctx context.Context) bool {
	cause := context.Cause(ctx)
	var ce *temporal.CanceledError
	var nf *serviceerror.NotFound
	return errors.As(cause, &ce) || errors.As(cause, &nf)
}

// progress is the Progress of a running turn, written by the OnEvent
// goroutine and read by the heartbeat goroutine.
type progress struct {
	mu sync.Mutex
	Progress
}

// update records ev and reports whether it carried a new session id.
func (p *progress) update(ev invoker.Event) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Events++
	p.Kind = ev.Kind.String()
	p.Text = truncate(ev.Text, 256)
	switch {
	case ev.Kind == invoker.KindDelta && ev.Delta == invoker.KindMessage:
		p.Partial = truncate(p.Partial+ev.Text, MaxPartial)
	case ev.Kind == invoker.KindMessage && ev.Text != "":
		p.Partial = truncate(ev.Text, MaxPartial)
	}
	if ev.SessionID != "" && ev.SessionID != p.SessionID {
		p.SessionID = ev.SessionID
		return true
	}
	return false
}

// finish takes the session id and partial answer from the result, which
// says them best (each backend knows how its CLI's messages add up).
func (p *progress) finish(res *invoker.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if res.SessionID != "" {
		p.SessionID = res.SessionID
	}
	if res.Text != "" {
		p.Partial = truncate(res.Text, MaxPartial)
	}
}

func (p *progress) snapshot() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Progress
}

// truncate keeps the last n bytes of s, on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}
