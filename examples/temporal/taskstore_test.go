package agentflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestTaskRecordWorkflow: the workflow answers its query with the latest
// record, records the task cancelled when it is cancelled, keeps the
// cancel against a renewal that did not see it, and completes with the
// record of the run's end.
func TestTaskRecordWorkflow(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(agentflow.TaskRecordWorkflow, workflow.RegisterOptions{Name: agentflow.TaskWorkflow})
	record := func() *mcpadapter.TaskRecord {
		t.Helper()
		v, err := env.QueryWorkflow(agentflow.TaskRecordQuery)
		require.NoError(t, err)
		var r mcpadapter.TaskRecord
		require.NoError(t, v.Get(&r))
		return &r
	}
	working := func(msg string) *mcpadapter.TaskRecord {
		return &mcpadapter.TaskRecord{ID: "TASK", Status: mcpadapter.TaskWorking, StatusMessage: msg}
	}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(agentflow.SaveTaskSignal, working("half way"))
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "half way", record().StatusMessage)
		env.CancelWorkflow()
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		r := record()
		require.Equal(t, mcpadapter.TaskCancelled, r.Status)
		require.Equal(t, agentflow.TaskCancelledByWorkflow, r.StatusMessage)
		env.SignalWorkflow(agentflow.SaveTaskSignal, working("a renewal that did not see the cancel"))
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, mcpadapter.TaskCancelled, record().Status, "the cancel after a renewal")
		end := working("")
		end.Status, end.StatusMessage, end.Result = mcpadapter.TaskCancelled, "cancelled", []byte(`{"isError":true}`)
		env.SignalWorkflow(agentflow.SaveTaskSignal, end)
	}, 4*time.Second)
	env.ExecuteWorkflow(agentflow.TaskWorkflow, working("starting"))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var final mcpadapter.TaskRecord
	require.NoError(t, env.GetWorkflowResult(&final))
	require.Equal(t, mcpadapter.TaskCancelled, final.Status)
	require.JSONEq(t, `{"isError":true}`, string(final.Result))
}
