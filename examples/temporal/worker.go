package agentflow

import (
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TaskQueue is the task queue the example's worker and starter use.
const TaskQueue = "clinvoke-agents"

// Register registers the RunTurn activity of a and the FanOut workflow with r
// under RunTurnActivity and FanOutWorkflow.
func Register(r worker.Registry, a *Activities) {
	r.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: RunTurnActivity})
	r.RegisterWorkflowWithOptions(FanOut, workflow.RegisterOptions{Name: FanOutWorkflow})
}

// WorkerOptions are the worker.Options the example's workers use: a
// heartbeat reaches the server at least every second (so a cancel reaches a
// turn within about a second, whatever its HeartbeatTimeout), and a stopping
// worker gives its turns 5 s to finish before it stops them (their trees
// are gone before Stop returns; the turns are retried elsewhere).
func WorkerOptions(identity string) worker.Options {
	return worker.Options{
		Identity:                     identity,
		MaxHeartbeatThrottleInterval: time.Second,
		WorkerStopTimeout:            5 * time.Second,
	}
}

// NewWorker returns a worker on queue that runs a's turns and FanOut.
func NewWorker(c client.Client, queue string, a *Activities) worker.Worker {
	w := worker.New(c, queue, WorkerOptions(a.Worker))
	Register(w, a)
	return w
}
