package agentflow_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/claude"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// noLeaks checks, when the test ends, that no goroutine and no agent process
// outlived it.
func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if left := invokertest.Survivors(); len(left) > 0 {
			t.Errorf("agent processes survived: %v", left)
		}
		goleak.VerifyNone(t)
	})
}

func activities(a invokertest.Agent) *agentflow.Activities {
	return &agentflow.Activities{
		Invokers:       map[string]invoker.Invoker{"claude": claude.New(a.Options())},
		HeartbeatEvery: 20 * time.Millisecond,
		Worker:         "test-worker",
	}
}

// The SDK's test environment throttles heartbeats to 0.8 × the activity's
// HeartbeatTimeout (it ignores the worker's MaxHeartbeatThrottleInterval):
// the tests ask for a short one.
const testHeartbeatTimeout = time.Second

func TestRunTurnHeartbeatsProgress(t *testing.T) {
	noLeaks(t)
	s := suite()
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	a := activities(invokertest.Agent{CLI: "claude", SessionID: "sess-hb", Answer: "all done", Chunks: 4, Progress: 3 * time.Second})
	agentflow.Register(env, a)

	var mu sync.Mutex
	var beats []agentflow.Progress
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p agentflow.Progress
		if err := details.Get(&p); err == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})

	out := runOneTurn(t, env)
	assert.Equal(t, "all done", out.Text)
	assert.Equal(t, "sess-hb", out.SessionID)
	assert.Equal(t, int32(1), out.Attempt)
	assert.False(t, out.Resumed)
	assert.Equal(t, "test-worker", out.Worker)

	mu.Lock()
	defer mu.Unlock()
	// Three seconds of progress, a heartbeat every 800 ms: several beats, the
	// later ones with the session id and the latest event.
	require.Greater(t, len(beats), 2, "heartbeats while the agent worked")
	lastBeat := beats[len(beats)-1]
	assert.Equal(t, "sess-hb", lastBeat.SessionID)
	assert.NotEmpty(t, lastBeat.Kind)
	assert.Positive(t, lastBeat.Events)
	assert.Equal(t, "test-worker", lastBeat.Worker)
}

// runOneTurn runs in env a FanOut of one claude turn, "hi" in a
// temporary directory, and returns its output once it is done.
func runOneTurn(t *testing.T, env *testsuite.TestWorkflowEnvironment) *agentflow.TurnOutput {
	t.Helper()
	env.ExecuteWorkflow(agentflow.FanOutWorkflow, agentflow.FanOutInput{
		HeartbeatTimeout: testHeartbeatTimeout,
		Turns:            []agentflow.TurnInput{{CLI: "claude", Prompt: "hi", Workdir: t.TempDir()}},
	})
	require.NoError(t, env.GetWorkflowError())
	var res agentflow.FanOutOutput
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, agentflow.StateDone, res.Results[0].State, "%+v", res.Results[0])
	return res.Results[0].Output
}

// TestRunTurnCancelledThroughHeartbeat cancels a turn from its workflow while
// the agent streams and never finishes: the cancel reaches the activity's
// context in a heartbeat's response, and RunTurn returns a CanceledError
// with the session id and partial answer once the tree is gone.
func TestRunTurnCancelledThroughHeartbeat(t *testing.T) {
	noLeaks(t)
	s := suite()
	env := s.NewTestWorkflowEnvironment()
	a := activities(invokertest.Agent{CLI: "claude", SessionID: "sess-cancel", Answer: "partial answer of a long turn", Chunks: 3, Stall: time.Hour})

	type ret struct {
		err       error
		survivors []int
	}
	returned := make(chan ret, 1)
	env.RegisterWorkflowWithOptions(agentflow.FanOut, workflow.RegisterOptions{Name: agentflow.FanOutWorkflow})
	env.RegisterActivityWithOptions(func(ctx context.Context, in agentflow.TurnInput) (*agentflow.TurnOutput, error) {
		out, err := a.RunTurn(ctx, in)
		returned <- ret{err, invokertest.Survivors()}
		return out, err
	}, activity.RegisterOptions{Name: agentflow.RunTurnActivity})

	var signalled atomic.Bool
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p agentflow.Progress
		if details.Get(&p) == nil && p.Partial != "" && !signalled.Swap(true) {
			env.SignalWorkflow(agentflow.CancelTurnSignal, 0)
		}
	})
	env.SetTestTimeout(time.Minute)
	env.ExecuteWorkflow(agentflow.FanOutWorkflow, agentflow.FanOutInput{
		HeartbeatTimeout: testHeartbeatTimeout,
		Turns:            []agentflow.TurnInput{{CLI: "claude", Prompt: "go on forever", Workdir: t.TempDir()}},
	})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out agentflow.FanOutOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	assert.Equal(t, agentflow.StateCancelled, out.Results[0].State)

	r := <-returned
	assert.Empty(t, r.survivors, "the agent's tree is gone when RunTurn returns")
	var ce *temporal.CanceledError
	require.ErrorAs(t, r.err, &ce)
	var p agentflow.Progress
	require.NoError(t, ce.Details(&p))
	assert.Equal(t, "sess-cancel", p.SessionID)
	assert.NotEmpty(t, p.Partial, "the partial answer")
	assert.Contains(t, "partial answer of a long turn", p.Partial)
	assert.False(t, p.GoneAt.IsZero())
}

// flaky runs its first call with first and every later one with then: an
// attempt that dies mid-turn, and the retry.
type flaky struct {
	invoker.Invoker // then
	first           invoker.Invoker
	calls           atomic.Int32
	requests        []invoker.Request
	mu              sync.Mutex
}

func (f *flaky) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.calls.Add(1) == 1 {
		return f.first.Invoke(ctx, req)
	}
	return f.Invoker.Invoke(ctx, req)
}

// noResume is a CLI that cannot resume a session.
type noResume struct{ invoker.Invoker }

func (n noResume) Capabilities() invoker.Capabilities {
	c := n.Invoker.Capabilities()
	c.Resume = false
	return c
}

// TestRetryResumesSession: an attempt that got a session id and then failed
// is retried in the same conversation, from the last heartbeat's session id,
// with ResumePrompt; a CLI that cannot resume starts over.
func TestRetryResumesSession(t *testing.T) {
	for _, canResume := range []bool{true, false} {
		t.Run(map[bool]string{true: "resume", false: "cannot-resume"}[canResume], func(t *testing.T) {
			noLeaks(t)
			f := &flaky{
				first: claude.New(invokertest.Agent{CLI: "claude", SessionID: "sess-first", Progress: 200 * time.Millisecond,
					Fail: "the model stream was cut"}.Options()),
				// An empty SessionID reports the session it resumes, or a fresh one.
				Invoker: claude.New(invokertest.Agent{CLI: "claude", Answer: "finished"}.Options()),
			}
			var inv invoker.Invoker = f
			if !canResume {
				inv = noResume{f}
			}
			s := suite()
			env := s.NewTestWorkflowEnvironment()
			agentflow.Register(env, &agentflow.Activities{
				Invokers: map[string]invoker.Invoker{"claude": inv}, HeartbeatEvery: 20 * time.Millisecond,
			})
			env.SetTestTimeout(time.Minute)
			env.ExecuteWorkflow(agentflow.FanOutWorkflow, agentflow.FanOutInput{
				HeartbeatTimeout: testHeartbeatTimeout,
				Turns:            []agentflow.TurnInput{{CLI: "claude", Prompt: "fix it", ResumePrompt: "go on", Workdir: t.TempDir()}},
			})
			require.NoError(t, env.GetWorkflowError())
			var out agentflow.FanOutOutput
			require.NoError(t, env.GetWorkflowResult(&out))
			r := out.Results[0]
			require.Equal(t, agentflow.StateDone, r.State, "%+v", r)
			assert.Equal(t, int32(2), r.Output.Attempt)
			assert.Equal(t, "finished", r.Output.Text)
			f.mu.Lock()
			defer f.mu.Unlock()
			require.Len(t, f.requests, 2)
			if canResume {
				assert.True(t, r.Output.Resumed)
				assert.Equal(t, "sess-first", f.requests[1].SessionID)
				assert.Equal(t, "go on", f.requests[1].Prompt)
				assert.Equal(t, "sess-first", r.Output.SessionID)
			} else {
				assert.False(t, r.Output.Resumed)
				assert.Empty(t, f.requests[1].SessionID)
				assert.Equal(t, "fix it", f.requests[1].Prompt)
				assert.NotEqual(t, "sess-first", r.Output.SessionID)
			}
		})
	}
}

// suite returns a test suite whose environments log nothing: the SDK's
// test environment logs every heartbeat at debug level.
func suite() *testsuite.WorkflowTestSuite {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return &s
}

// TestResumeNotTakenUpStartsOver: an attempt that resumed a session the CLI
// did not take up (it reported none: the session is unknown on this worker,
// say) leaves no session id in its last heartbeat, so that the next attempt
// starts over instead of failing the same way.
func TestResumeNotTakenUpStartsOver(t *testing.T) {
	noLeaks(t)
	seq := &sequence{invs: []invoker.Invoker{
		claude.New(invokertest.Agent{CLI: "claude", SessionID: "sess-lost", Progress: 200 * time.Millisecond, Fail: "cut"}.Options()),
		// Exits at once without a word, as a CLI that cannot find the session might.
		claude.New(invoker.Options{Binary: "/bin/false"}),
		claude.New(invokertest.Agent{CLI: "claude", Answer: "from scratch"}.Options()),
	}}
	env := suite().NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	agentflow.Register(env, &agentflow.Activities{
		Invokers: map[string]invoker.Invoker{"claude": seq}, HeartbeatEvery: 20 * time.Millisecond,
	})
	env.ExecuteWorkflow(agentflow.FanOutWorkflow, agentflow.FanOutInput{
		HeartbeatTimeout: testHeartbeatTimeout,
		Turns:            []agentflow.TurnInput{{CLI: "claude", Prompt: "p", Workdir: t.TempDir()}},
	})
	var out agentflow.FanOutOutput
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, agentflow.StateDone, out.Results[0].State, "%+v", out.Results[0])
	assert.Equal(t, int32(3), out.Results[0].Output.Attempt)
	assert.False(t, out.Results[0].Output.Resumed)
	seq.mu.Lock()
	defer seq.mu.Unlock()
	require.Len(t, seq.requests, 3)
	assert.Equal(t, []string{"", "sess-lost", ""},
		[]string{seq.requests[0].SessionID, seq.requests[1].SessionID, seq.requests[2].SessionID})
}

// sequence runs its nth call with invs[n] (the last one past the end).
type sequence struct {
	invs     []invoker.Invoker
	mu       sync.Mutex
	requests []invoker.Request
}

func (s *sequence) Name() string                       { return s.invs[0].Name() }
func (s *sequence) Capabilities() invoker.Capabilities { return s.invs[0].Capabilities() }
func (s *sequence) OpenSession(ctx context.Context, r invoker.SessionRequest) (invoker.Session, error) {
	return s.invs[0].OpenSession(ctx, r)
}

func (s *sequence) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	inv := s.invs[min(len(s.requests), len(s.invs))-1]
	s.mu.Unlock()
	return inv.Invoke(ctx, req)
}

// TestWorkerStopRetries: a worker that stops while a turn runs cancels the
// turn's context with no cancel from the server: RunTurn then reports a
// retryable WorkerStopped error, not a cancelled turn, so that the turn is
// retried (and resumed) on another worker.
func TestWorkerStopRetries(t *testing.T) {
	noLeaks(t)
	root, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	env := suite().NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: root})
	a := activities(invokertest.Agent{CLI: "claude", SessionID: "sess-stop", Answer: "never finished", Chunks: 3, Stall: time.Hour})
	env.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: agentflow.RunTurnActivity})
	time.AfterFunc(500*time.Millisecond, stopWorker)
	_, err := env.ExecuteActivity(agentflow.RunTurnActivity, agentflow.TurnInput{CLI: "claude", Prompt: "p", Workdir: t.TempDir()})
	assert.Empty(t, invokertest.Survivors(), "the tree is gone when RunTurn returns")
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, agentflow.ErrorTypeWorkerStopped, ae.Type())
	assert.False(t, ae.NonRetryable())
	var p agentflow.Progress
	require.NoError(t, ae.Details(&p))
	assert.Equal(t, "sess-stop", p.SessionID)
	assert.Equal(t, "never finished", p.Partial)
}
