package agentflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/clinvoke/clinvoke/claude"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("claude: %w", err) }
	cases := []struct {
		name      string
		err       error
		typ       string
		retryable bool
		delay     time.Duration
	}{
		{"rate limit with reset", wrap(&invoker.StreamError{Message: "429 Too Many Requests. Please try again in 20s.", Err: invoker.ErrRateLimited}),
			agentflow.ErrorTypeRateLimited, true, 20 * time.Second},
		{"rate limit", wrap(&invoker.ExitError{ExitCode: 1, Err: invoker.ErrRateLimited}), agentflow.ErrorTypeRateLimited, true, 0},
		{"invalid request", wrap(invoker.ErrInvalidRequest), agentflow.ErrorTypeInvalidRequest, false, 0},
		{"unsupported", wrap(invoker.ErrUnsupported), agentflow.ErrorTypeInvalidRequest, false, 0},
		{"not installed", wrap(invoker.ErrNotInstalled), agentflow.ErrorTypeNotInstalled, false, 0},
		{"auth", wrap(&invoker.StreamError{Message: "401", Err: invoker.ErrAuthRequired}), agentflow.ErrorTypeAuthRequired, false, 0},
		{"schema", wrap(&invoker.SchemaError{Text: "no", Err: errors.New("not JSON")}), agentflow.ErrorTypeSchema, false, 0},
		{"max turns", wrap(&invoker.LimitError{Limit: invoker.ErrMaxTurns}), agentflow.ErrorTypeLimit, false, 0},
		{"line too long", wrap(invoker.ErrLineTooLong), agentflow.ErrorTypeLineTooLong, false, 0},
		{"exit", wrap(&invoker.ExitError{ExitCode: 3}), agentflow.ErrorTypeAgentFailed, true, 0},
		{"no result", wrap(invoker.ErrNoResult), agentflow.ErrorTypeAgentFailed, true, 0},
		{"idle timeout", wrap(invoker.ErrIdleTimeout), agentflow.ErrorTypeAgentFailed, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := agentflow.Classify(c.err, agentflow.Progress{SessionID: "s"})
			var ae *temporal.ApplicationError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, c.typ, ae.Type())
			assert.Equal(t, !c.retryable, ae.NonRetryable())
			assert.InDelta(t, c.delay, ae.NextRetryDelay(), float64(2*time.Second))
			assert.Equal(t, c.err.Error(), ae.Message())
			var p agentflow.Progress
			require.NoError(t, ae.Details(&p))
			assert.Equal(t, "s", p.SessionID)
		})
	}
}

func TestResetDelay(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for msg, want := range map[string]time.Duration{
		"Claude AI usage limit reached|1700003600":                        time.Hour,
		"You've hit your usage limit. Try again in 2 hours 5 minutes.":    2*time.Hour + 5*time.Minute,
		"Rate limit reached for gpt-5. Please try again in 1m20s.":        80 * time.Second,
		"Please try again in 350ms.":                                      350 * time.Millisecond,
		"Quota exceeded. Please retry in 12.5s.":                          12500 * time.Millisecond,
		`{"error":{"code":429,"details":[{"retryDelay": "37s"}]}}`:        37 * time.Second,
		"429 Too Many Requests":                                           0,
		"Claude AI usage limit reached|1699990000":                        0, // already past
		"try again in a moment":                                           0,
		"usage limit reached, try again in 3 days":                        72 * time.Hour,
		"Rate limited; please retry in 45 seconds, or upgrade your plan.": 45 * time.Second,
	} {
		assert.Equal(t, want, agentflow.ResetDelay(msg, now), msg)
	}
}

// TestRetryClassificationInWorkflow runs failing turns through the workflow:
// a failure that cannot pass on another attempt is tried once, a rate limit
// again; fail-fast stops the rest, collect-all reports every turn.
func TestRetryClassificationInWorkflow(t *testing.T) {
	noLeaks(t)
	ok := claude.New(invokertest.Agent{CLI: "claude", Answer: "fine", Progress: 300 * time.Millisecond}.Options())
	limited := &counting{Invoker: claude.New(invokertest.Agent{CLI: "claude", Fail: "API Error: 429 rate limit exceeded. Please try again in 2s"}.Options())}
	missing := &counting{Invoker: claude.New(invoker.Options{Binary: "/nonexistent/claude"})}

	for _, failFast := range []bool{false, true} {
		t.Run(fmt.Sprintf("failFast=%v", failFast), func(t *testing.T) {
			limited.n.Store(0)
			missing.n.Store(0)
			s := suite()
			env := s.NewTestWorkflowEnvironment()
			env.SetTestTimeout(time.Minute)
			agentflow.Register(env, &agentflow.Activities{
				Invokers:       map[string]invoker.Invoker{"ok": ok, "limited": limited, "missing": missing},
				HeartbeatEvery: 20 * time.Millisecond,
			})
			dir := t.TempDir()
			env.ExecuteWorkflow(agentflow.FanOutWorkflow, agentflow.FanOutInput{
				Concurrency: 1, FailFast: failFast, MaxAttempts: 3, HeartbeatTimeout: testHeartbeatTimeout,
				Turns: []agentflow.TurnInput{
					{CLI: "missing", Prompt: "p", Workdir: dir},
					{CLI: "limited", Prompt: "p", Workdir: dir},
					{CLI: "ok", Prompt: "p", Workdir: dir},
				},
			})
			var out agentflow.FanOutOutput
			if failFast {
				var ae *temporal.ApplicationError
				require.ErrorAs(t, env.GetWorkflowError(), &ae)
				assert.Equal(t, agentflow.ErrorTypeTurnFailed, ae.Type())
				assert.Contains(t, ae.Error(), "turn 0 failed")
				v, err := env.QueryWorkflow(agentflow.StatusQuery)
				require.NoError(t, err)
				require.NoError(t, v.Get(&out.Results))
				assert.Equal(t, agentflow.StateFailed, out.Results[0].State)
				assert.Equal(t, agentflow.ErrorTypeNotInstalled, out.Results[0].ErrorType)
				assert.Equal(t, agentflow.StateSkipped, out.Results[1].State)
				assert.Equal(t, agentflow.StateSkipped, out.Results[2].State)
				assert.Equal(t, int32(1), missing.n.Load(), "not retried")
				assert.Zero(t, limited.n.Load())
				return
			}
			require.NoError(t, env.GetWorkflowError())
			require.NoError(t, env.GetWorkflowResult(&out))
			assert.Equal(t, agentflow.ErrorTypeNotInstalled, out.Results[0].ErrorType)
			assert.Equal(t, int32(1), missing.n.Load(), "a missing CLI is not retried")
			assert.Equal(t, agentflow.StateFailed, out.Results[1].State)
			assert.Equal(t, agentflow.ErrorTypeRateLimited, out.Results[1].ErrorType)
			assert.Equal(t, int32(3), limited.n.Load(), "a rate limit is retried up to MaxAttempts")
			assert.Equal(t, agentflow.StateDone, out.Results[2].State)
			assert.Equal(t, "fine", out.Results[2].Output.Text)
		})
	}
}

type counting struct {
	invoker.Invoker
	n atomic.Int32
}

func (c *counting) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	c.n.Add(1)
	return c.Invoker.Invoke(ctx, req)
}
