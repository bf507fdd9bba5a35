package agentflow_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// taskCallMethod is the custom method that taskCalls sends as a
// task-augmented tools/call (the go-sdk client has no tasks).
const taskCallMethod = "x-test/tools-call-task"

type taskCalls struct{ base http.RoundTripper }

func (tc taskCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		b = bytes.Replace(b, []byte(`"method":"`+taskCallMethod+`"`), []byte(`"method":"tools/call"`), 1)
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		if r.Header.Get("Mcp-Method") == taskCallMethod {
			r.Header.Set("Mcp-Method", "tools/call")
			r.Header.Set("Mcp-Name", "agent")
		}
	}
	return tc.base.RoundTrip(r)
}

type taskCallParams struct {
	mcp.ParamsBase
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Task      map[string]any `json:"task"`
}

type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
}

type createTaskRes struct {
	mcp.ResultBase
	Task wireTask `json:"task"`
}

type taskIDArgs struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type getTaskRes struct {
	mcp.ResultBase
	wireTask
}

type taskResultRes struct {
	mcp.ResultBase
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// blocker is an agent whose turn runs until it is cancelled.
type blocker struct {
	started chan struct{}
	causes  chan error
}

func (b *blocker) Name() string                       { return "agent" }
func (b *blocker) Capabilities() invoker.Capabilities { return invoker.Capabilities{} }
func (b *blocker) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}

func (b *blocker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "sess-blocked"})
	b.started <- struct{}{}
	<-ctx.Done()
	b.causes <- context.Cause(ctx)
	return &invoker.Result{SessionID: "sess-blocked", ExitCode: -1}, ctx.Err()
}

// replica serves an MCP server whose tasks are kept by a TaskStore on
// queue of c, statelessly over HTTP, and returns a client session of it.
func replica(t *testing.T, c client.Client, queue string, inv invoker.Invoker) (*mcp.ClientSession, *agentflow.TaskStore) {
	t.Helper()
	store, err := agentflow.NewTaskStore(c, queue)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	srv, tools, err := serveReplica(store, 3*time.Second, inv)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		require.NoError(t, tools.Shutdown(ctx))
	})
	return connectTasks(t, srv.URL), store
}

// serveReplica serves, statelessly over HTTP, an MCP server whose tasks
// store keeps with a lease of lease.
func serveReplica(store mcpadapter.TaskStore, lease time.Duration, inv invoker.Invoker) (*httptest.Server, *mcpadapter.Tools, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "replica", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{HeartbeatInterval: 20 * time.Millisecond,
		Tasks: mcpadapter.TaskOptions{Store: store, PollInterval: 20 * time.Millisecond, Lease: lease}}, inv)
	if err != nil {
		return nil, nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	return httptest.NewServer(tools.Handler(h)), tools, nil
}

// connectTasks returns a client session of the server at url that speaks
// tasks.
func connectTasks(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "task-client", Version: "v0.0.1"}, nil)
	require.NoError(t, mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](cl, taskCallMethod))
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDArgs, *getTaskRes](cl, "tasks/get"))
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDArgs, *getTaskRes](cl, "tasks/cancel"))
	require.NoError(t, mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](cl, "tasks/result"))
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: taskCalls{base: http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestTaskStoreAcrossReplicas: two replicas keep their MCP tasks in
// Temporal, each through its own client, as two processes would. A task
// created on one is its workflow (the task id is the workflow id), seen
// working from the other; cancelling the workflow cancels the task's run,
// and tasks/cancel on the other replica cancels the workflow.
func TestTaskStoreAcrossReplicas(t *testing.T) {
	noLeaks(t)
	addr, ns := devServer(t)
	dial := func() client.Client {
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	c1, c2 := dial(), dial()
	const queue = "clinvoke-mcp-tasks"
	inv := &blocker{started: make(chan struct{}, 2), causes: make(chan error, 2)}
	one, _ := replica(t, c1, queue, inv)
	two, store := replica(t, c2, queue, &blocker{started: make(chan struct{}, 2), causes: make(chan error, 2)})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	create := func() string {
		res, err := mcp.CallCustomMethod[*taskCallParams, *createTaskRes](ctx, one, taskCallMethod,
			&taskCallParams{Name: "agent", Arguments: map[string]any{"prompt": "hold on", "workdir": t.TempDir()}, Task: map[string]any{}})
		require.NoError(t, err)
		<-inv.started
		return res.Task.TaskID
	}

	// Cancelling the workflow cancels the task's run.
	id := create()
	got, err := mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctx, two, "tasks/get", &taskIDArgs{TaskID: id})
	require.NoError(t, err)
	require.Equal(t, mcpadapter.TaskWorking, got.Status, "tasks/get on the other replica")
	rec, err := store.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, rec.ID)
	require.NoError(t, c2.CancelWorkflow(ctx, id, ""))
	require.ErrorIs(t, <-inv.causes, mcpadapter.ErrTaskCancelled, "the run's cause after the workflow's cancel")
	res, err := mcp.CallCustomMethod[*taskIDArgs, *taskResultRes](ctx, two, "tasks/result", &taskIDArgs{TaskID: id})
	require.NoError(t, err)
	var out mcpadapter.Output
	require.NoError(t, json.Unmarshal(res.StructuredContent, &out))
	require.True(t, res.IsError)
	require.Equal(t, mcpadapter.StatusCancelled, out.Status, "the result of the task whose workflow was cancelled")
	var final mcpadapter.TaskRecord
	require.NoError(t, c1.GetWorkflow(ctx, id, "").Get(ctx, &final), "the workflow's result")
	require.Equal(t, mcpadapter.TaskCancelled, final.Status)
	require.Equal(t, agentflow.TaskCancelledByWorkflow, final.StatusMessage)

	// tasks/cancel on the other replica cancels the workflow.
	id = create()
	got, err = mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctx, two, "tasks/cancel", &taskIDArgs{TaskID: id})
	require.NoError(t, err)
	require.Equal(t, mcpadapter.TaskCancelled, got.Status, "tasks/cancel on the other replica")
	require.ErrorIs(t, <-inv.causes, mcpadapter.ErrTaskCancelled, "the run's cause after tasks/cancel")
	d, err := c1.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.NotNil(t, d.GetWorkflowExecutionInfo().GetCloseTime(), "the workflow of the cancelled task is closed")
	hist := c1.GetWorkflowHistory(ctx, id, "", false, 0)
	requested := false
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		requested = requested || ev.GetWorkflowExecutionCancelRequestedEventAttributes() != nil
	}
	require.True(t, requested, "tasks/cancel requested the cancel of the task's workflow")
}

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

// envReplica, set to "ADDRESS NAMESPACE", makes the test binary an MCP
// server replica keeping its tasks in Temporal, whose blocked turns run
// until it is killed (see replicaMain).
const envReplica = "CLINVOKE_TEMPORAL_MCP_REPLICA"

// replicaLease is the lease of the replica process's tasks.
const replicaLease = 900 * time.Millisecond

// replicaMain serves a replica on 127.0.0.1, prints its URL, and runs
// until it is signalled.
func replicaMain(spec string) int {
	f := strings.Fields(spec)
	c, err := client.Dial(client.Options{HostPort: f[0], Namespace: f[1], Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err := agentflow.NewTaskStore(c, f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, _, err := serveReplica(store, replicaLease, &blocker{started: make(chan struct{}, 10), causes: make(chan error, 10)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return 0
}

// TestTaskStoreReplicaKilled: a replica process is SIGKILLed while its
// task runs; another replica, sharing the task through Temporal, reports
// the task failed with the cause once the dead replica's lease passed, and
// the task's workflow completes with that record.
func TestTaskStoreReplicaKilled(t *testing.T) {
	noLeaks(t)
	addr, ns := devServer(t)
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	const queue = "clinvoke-mcp-tasks-killed"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envReplica+"="+addr+" "+ns+" "+queue)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	stopProcess(t, cmd, "replica")
	url, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the replica's URL")
	dead := connectTasks(t, strings.TrimSpace(url))
	live, store := replica(t, c, queue, &blocker{started: make(chan struct{}, 1), causes: make(chan error, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()

	res, err := mcp.CallCustomMethod[*taskCallParams, *createTaskRes](ctx, dead, taskCallMethod,
		&taskCallParams{Name: "agent", Arguments: map[string]any{"prompt": "hold on", "workdir": t.TempDir()}, Task: map[string]any{}})
	require.NoError(t, err)
	id := res.Task.TaskID
	got, err := mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctx, live, "tasks/get", &taskIDArgs{TaskID: id})
	require.NoError(t, err)
	require.Equal(t, mcpadapter.TaskWorking, got.Status, "tasks/get on the live replica before the kill")

	require.NoError(t, cmd.Process.Kill())
	require.Error(t, cmd.Wait(), "the killed replica's exit")
	rec, err := store.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, mcpadapter.TaskWorking, rec.Status, "the record the killed replica left")
	<-time.After(time.Until(rec.LeaseUntil)) // the lease's end, the condition under test
	got, err = mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctx, live, "tasks/get", &taskIDArgs{TaskID: id})
	require.NoError(t, err)
	require.Equal(t, mcpadapter.TaskFailed, got.Status, "tasks/get on the live replica after the lease")
	require.Contains(t, got.StatusMessage, mcpadapter.ErrTaskReplicaLost.Error())
	var final mcpadapter.TaskRecord
	require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, &final), "the workflow's result")
	require.Equal(t, mcpadapter.TaskFailed, final.Status)
}
