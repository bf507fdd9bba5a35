package agentflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/clinvoke/clinvoke/mcpadapter"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Names of the workflow that holds an MCP task's record, of its signal and
// query, and of the memo field that names the task's owner.
const (
	// TaskWorkflow is the workflow of one MCP task: its workflow id is the
	// task id, and it holds the task's mcpadapter.TaskRecord until the end
	// of the task's run is recorded; then it completes with the record.
	TaskWorkflow = "MCPTask"
	// SaveTaskSignal replaces the record the workflow holds.
	SaveTaskSignal = "save-task"
	// TaskRecordQuery returns the record the workflow holds.
	TaskRecordQuery = "task-record"
	// taskOwnerMemo is the memo field of a task's workflow that names the
	// identity that owns the task, for List.
	taskOwnerMemo = "owner"
)

// TaskCancelledByWorkflow is the status message of a task whose workflow was
// cancelled from outside the MCP server (`temporal workflow cancel`, or a
// client's CancelWorkflow).
const TaskCancelledByWorkflow = "cancelled: its workflow was cancelled"

// A TaskStore is an mcpadapter.TaskStore kept by Temporal, to share the MCP
// tasks of server replicas in separate processes (Options.Tasks.Store): each
// task is a TaskWorkflow whose workflow id is the task id and which holds its
// record; cancelling the workflow cancels the task, wherever its run is, and
// tasks/cancel cancels the workflow. The run stays in the replica that
// created the task; the replica's lease (mcpadapter.TaskOptions.Lease) is
// what tells the others that it died.
type TaskStore struct {
	c client.Client
	w worker.Worker
	q string
}

// NewTaskStore returns a TaskStore that keeps its records with c on queue,
// and starts the worker that serves their workflows' queries and signals.
// Call Close when done.
func NewTaskStore(c client.Client, queue string) (*TaskStore, error) {
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(TaskRecordWorkflow, workflow.RegisterOptions{Name: TaskWorkflow})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the worker of the task store on queue %q: %w", queue, err)
	}
	return &TaskStore{c: c, w: w, q: queue}, nil
}

// Close stops the store's worker.
func (s *TaskStore) Close() { s.w.Stop() }

// runEnded reports whether r records the end of its task's run.
func runEnded(r *mcpadapter.TaskRecord) bool { return r.Result != nil || r.ErrorMessage != "" }

// Save implements mcpadapter.TaskStore: it starts the task's workflow or
// signals it the record. A record that asks for the cancel of a running
// task also cancels the workflow.
func (s *TaskStore) Save(ctx context.Context, r *mcpadapter.TaskRecord) error {
	opts := client.StartWorkflowOptions{
		ID:                    r.ID,
		TaskQueue:             s.q,
		Memo:                  map[string]any{taskOwnerMemo: r.Owner},
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	if _, err := s.c.SignalWithStartWorkflow(ctx, r.ID, SaveTaskSignal, r, opts, TaskWorkflow, r); err != nil {
		return fmt.Errorf("saving task %s in its workflow: %w", r.ID, err)
	}
	if r.Status == mcpadapter.TaskCancelled && !runEnded(r) {
		if err := s.c.CancelWorkflow(ctx, r.ID, ""); err != nil {
			return fmt.Errorf("cancelling the workflow of task %s: %w", r.ID, err)
		}
	}
	return nil
}

// Load implements mcpadapter.TaskStore: the record of a running or
// completed workflow; a terminated one (Delete) is not found.
func (s *TaskStore) Load(ctx context.Context, id string) (*mcpadapter.TaskRecord, error) {
	d, err := s.c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, mcpadapter.ErrTaskNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("describing the workflow of task %s: %w", id, err)
	}
	switch d.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
	default:
		return nil, mcpadapter.ErrTaskNotFound
	}
	v, err := s.c.QueryWorkflow(ctx, id, "", TaskRecordQuery)
	if err != nil {
		return nil, fmt.Errorf("querying the workflow of task %s: %w", id, err)
	}
	var r mcpadapter.TaskRecord
	if err := v.Get(&r); err != nil {
		return nil, fmt.Errorf("decoding the record of task %s: %w", id, err)
	}
	return &r, nil
}

// List implements mcpadapter.TaskStore from Temporal's visibility, which
// may lag a task's creation by a moment.
func (s *TaskStore) List(ctx context.Context, owner string) ([]*mcpadapter.TaskRecord, error) {
	var out []*mcpadapter.TaskRecord
	var token []byte
	for {
		resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", TaskWorkflow),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the task workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			var o string
			if p := e.GetMemo().GetFields()[taskOwnerMemo]; p == nil || converter.GetDefaultDataConverter().FromPayload(p, &o) != nil || o != owner {
				continue
			}
			r, err := s.Load(ctx, e.GetExecution().GetWorkflowId())
			if errors.Is(err, mcpadapter.ErrTaskNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	// Visibility lists the newest first; tasks/list wants the oldest.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Delete implements mcpadapter.TaskStore: it terminates the task's
// workflow, if it still runs; Load then finds no task, and Temporal
// deletes the workflow's history after the namespace's retention.
func (s *TaskStore) Delete(ctx context.Context, id string) error {
	err := s.c.TerminateWorkflow(ctx, id, "", "the task was deleted")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("terminating the workflow of task %s: %w", id, err)
	}
	return nil
}

// TaskRecordWorkflow is the TaskWorkflow: it holds first, then each record
// signalled to it (SaveTaskSignal), answers TaskRecordQuery with it, and
// completes with the record that ends the task's run. Cancelled, it records
// the task cancelled (the replica running it stops the run when it next
// reads the record) and waits for the end of the run; a record signalled
// afterwards does not undo the cancel.
func TaskRecordWorkflow(ctx workflow.Context, first *mcpadapter.TaskRecord) (*mcpadapter.TaskRecord, error) {
	rec := first
	if err := workflow.SetQueryHandler(ctx, TaskRecordQuery, func() (*mcpadapter.TaskRecord, error) { return rec, nil }); err != nil {
		return nil, err
	}
	saves := workflow.GetSignalChannel(ctx, SaveTaskSignal)
	cancelled := false
	recv := ctx
	for !runEnded(rec) {
		sel := workflow.NewSelector(recv)
		sel.AddReceive(saves, func(c workflow.ReceiveChannel, _ bool) {
			var r mcpadapter.TaskRecord
			c.Receive(recv, &r)
			if cancelled && !runEnded(&r) {
				r.Status, r.StatusMessage = rec.Status, rec.StatusMessage
			}
			rec = &r
		})
		if !cancelled {
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
				cancelled = true
				recv, _ = workflow.NewDisconnectedContext(ctx)
				if rec.Status != mcpadapter.TaskCancelled {
					r := *rec
					r.Status, r.StatusMessage, r.Updated = mcpadapter.TaskCancelled, TaskCancelledByWorkflow, workflow.Now(ctx)
					rec = &r
				}
			})
		}
		sel.Select(recv)
	}
	return rec, nil
}
