package agentflow

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names under which Register registers the activity and the workflow, and of
// the workflow's signal and query.
const (
	RunTurnActivity = "RunTurn"
	FanOutWorkflow  = "FanOut"

	// CancelTurnSignal cancels one turn of a running FanOut: its payload is
	// the turn's index in FanOutInput.Turns. A running turn's agent is
	// stopped (its tree gone before the turn is reported cancelled); a turn
	// not started yet never starts. Cancelling the workflow cancels all.
	CancelTurnSignal = "cancel-turn"
	// StatusQuery returns the []TurnResult so far.
	StatusQuery = "status"
)

// FanOutInput is the input of the FanOut workflow.
type FanOutInput struct {
	Turns []TurnInput
	// Concurrency is the most turns running at once; zero means 4.
	Concurrency int
	// FailFast stops at the first turn that fails for good (after its
	// retries): the running turns are cancelled, the others never start,
	// and the workflow fails with that turn's error. Otherwise every turn
	// runs and the workflow returns every result, failures included.
	FailFast bool

	// TurnTimeout bounds one attempt of a turn (StartToCloseTimeout); zero
	// means 30 minutes.
	TurnTimeout time.Duration
	// HeartbeatTimeout is how long the server waits for a heartbeat before
	// it deems the worker lost and retries the turn elsewhere; zero means
	// 10 s.
	HeartbeatTimeout time.Duration
	// MaxAttempts bounds the attempts of a turn; zero means 5.
	MaxAttempts int32
	// RetryInterval is the first delay between attempts (doubling up to
	// a minute), where the error names none; zero means 1 s.
	RetryInterval time.Duration
}

// Turn states in TurnResult.
const (
	StateDone      = "done"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StatePending   = "pending"
	StateRunning   = "running"
	StateSkipped   = "skipped" // never started: fail-fast or cancelled first
)

// ErrorTypeTurnFailed is the type of the error of a fail-fast FanOut that
// stopped at a failed turn; the turn's error is its cause, and the status
// query (StatusQuery) still gives every turn's result.
const ErrorTypeTurnFailed = "TurnFailed"

// TurnResult is the outcome of one turn of a FanOut.
type TurnResult struct {
	Index int
	State string
	// Output is the turn's output when it is done.
	Output *TurnOutput `json:",omitempty"`
	// Error and ErrorType say why a turn failed (ErrorType is one of the
	// ErrorType constants, or a Temporal timeout's).
	Error     string `json:",omitempty"`
	ErrorType string `json:",omitempty"`
	// Progress is the turn's last Progress when it was cancelled or failed:
	// its session id to resume, the partial answer.
	Progress *Progress `json:",omitempty"`
}

// FanOutOutput is the result of the FanOut workflow.
type FanOutOutput struct {
	Results []TurnResult
}

// FanOut runs in.Turns as RunTurn activities, at most in.Concurrency at once,
// in order of their index.
func FanOut(ctx workflow.Context, in FanOutInput) (*FanOutOutput, error) {
	conc := in.Concurrency
	if conc <= 0 {
		conc = 4
	}
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: or(in.TurnTimeout, 30*time.Minute),
		HeartbeatTimeout:    or(in.HeartbeatTimeout, 10*time.Second),
		// The workflow hears of a cancelled turn only once the activity
		// reported it, after clinvoke reaped the agent's tree.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    or(in.RetryInterval, time.Second),
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    max(in.MaxAttempts, 0),
		},
	}
	if ao.RetryPolicy.MaximumAttempts == 0 {
		ao.RetryPolicy.MaximumAttempts = 5
	}

	n := len(in.Turns)
	out := &FanOutOutput{Results: make([]TurnResult, n)}
	for i := range out.Results {
		out.Results[i] = TurnResult{Index: i, State: StatePending}
	}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() ([]TurnResult, error) {
		return out.Results, nil
	}); err != nil {
		return nil, err
	}

	ctx, cancelAll := workflow.WithCancel(ctx)
	defer cancelAll()
	cancels := make([]workflow.CancelFunc, n)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, CancelTurnSignal), func(c workflow.ReceiveChannel, _ bool) {
		var i int
		c.Receive(ctx, &i)
		switch {
		case i < 0 || i >= n:
			workflow.GetLogger(ctx).Warn("cancel-turn: no such turn", "index", i)
		case cancels[i] != nil:
			cancels[i]()
		case out.Results[i].State == StatePending:
			out.Results[i].State = StateSkipped
		}
	})

	var firstErr error
	next, running, settled := 0, 0, 0
	for settled < n {
		stopping := firstErr != nil || ctx.Err() != nil
		for ; next < n && (running < conc || stopping); next++ {
			if stopping || out.Results[next].State == StateSkipped {
				out.Results[next].State = StateSkipped
				settled++
				continue
			}
			i := next
			actx, cancel := workflow.WithCancel(ctx)
			cancels[i] = cancel
			actx = workflow.WithActivityOptions(actx, withID(ao, fmt.Sprintf("turn-%d", i)))
			out.Results[i].State = StateRunning
			running++
			sel.AddFuture(workflow.ExecuteActivity(actx, RunTurnActivity, in.Turns[i]), func(f workflow.Future) {
				running--
				settled++
				cancels[i] = nil
				r := &out.Results[i]
				var o TurnOutput
				err := f.Get(ctx, &o)
				if err == nil {
					r.State, r.Output = StateDone, &o
					return
				}
				describe(r, err)
				if r.State == StateFailed && in.FailFast && firstErr == nil {
					firstErr = temporal.NewNonRetryableApplicationError(
						fmt.Sprintf("turn %d failed: %v", i, err), ErrorTypeTurnFailed, err)
					cancelAll()
				}
			})
		}
		if settled == n {
			break
		}
		sel.Select(ctx)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the workflow was cancelled; StatusQuery has the results
	}
	return out, nil
}

// describe records a turn's error in r: cancelled, with the agent's last
// progress, or failed, with the cause's type.
func describe(r *TurnResult, err error) {
	var ce *temporal.CanceledError
	if errors.As(err, &ce) {
		r.State = StateCancelled
		var p Progress
		if ce.HasDetails() && ce.Details(&p) == nil {
			r.Progress = &p
		}
		return
	}
	r.State, r.Error = StateFailed, err.Error()
	var ae *temporal.ApplicationError
	var te *temporal.TimeoutError
	switch {
	case errors.As(err, &ae):
		r.ErrorType = ae.Type()
		var p Progress
		if ae.HasDetails() && ae.Details(&p) == nil {
			r.Progress = &p
		}
	case errors.As(err, &te):
		r.ErrorType = "Timeout" + te.TimeoutType().String()
		var p Progress
		if te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&p) == nil {
			r.Progress = &p
		}
	}
}

func withID(ao workflow.ActivityOptions, id string) workflow.ActivityOptions {
	ao.ActivityID = id
	return ao
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
