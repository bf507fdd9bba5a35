package mcpadapter_test

// Tasks (MCP 2025-11-25) served over streamable HTTP by Tools.Handler: a
// go-sdk client sends the raw methods. The SDK's client has no tasks; a
// task-augmented tools/call is sent as a custom method whose name the
// client's HTTP transport turns into tools/call.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// taskCallMethod is the custom method that taskCalls turns into a
// task-augmented tools/call.
const taskCallMethod = "x-test/tools-call-task"

// taskCalls is an http.RoundTripper that sends taskCallMethod as
// tools/call.
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
		if r.Header.Get("Mcp-Method") == taskCallMethod { // the routing headers of 2026-07-28
			var msg struct {
				Params struct{ Name string } `json:"params"`
			}
			json.Unmarshal(b, &msg)
			r.Header.Set("Mcp-Method", "tools/call")
			r.Header.Set("Mcp-Name", msg.Params.Name)
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
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type createTaskRes struct {
	mcp.ResultBase
	Task wireTask `json:"task"`
}

type getTaskRes struct {
	mcp.ResultBase
	wireTask
}

type taskIDArgs struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type listTasksArgs struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type listTasksRes struct {
	mcp.ResultBase
	Tasks      []wireTask `json:"tasks"`
	NextCursor string     `json:"nextCursor"`
}

type taskResultRes struct {
	mcp.ResultBase
	Content           []map[string]any `json:"content"`
	StructuredContent json.RawMessage  `json:"structuredContent"`
	IsError           bool             `json:"isError"`
}

// taskClient is a go-sdk client session that speaks tasks.
type taskClient struct {
	t  *testing.T
	cs *mcp.ClientSession
}

// dialTasks connects a client of protocol 2025-11-25 sending token ("" for
// none); the session is closed at cleanup.
func (s *accessServer) dialTasks(t *testing.T, token string) *taskClient {
	t.Helper()
	hc := &http.Client{Transport: taskCalls{base: http.DefaultTransport}}
	if token != "" {
		hc.Transport = taskCalls{base: bearer{token: token}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "task-client", Version: "v0.0.1"}, nil)
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *getTaskRes](client, "tasks/get"),
		mcp.AddSendingCustomMethod[*taskIDArgs, *getTaskRes](client, "tasks/cancel"),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
		mcp.AddSendingCustomMethod[*listTasksArgs, *listTasksRes](client, "tasks/list"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting with token %.8q: %v", token, err)
	}
	tc := &taskClient{t: t, cs: cs}
	t.Cleanup(func() { tc.close() })
	return tc
}

func (tc *taskClient) close() {
	if err := tc.cs.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		tc.t.Errorf("ClientSession.Close() error = %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	t.Cleanup(cancel)
	return ctx
}

// create sends a task-augmented call of tool.
func (tc *taskClient) create(tool string, args map[string]any, task map[string]any) wireTask {
	tc.t.Helper()
	res, err := mcp.CallCustomMethod[*taskCallParams, *createTaskRes](ctxT(tc.t), tc.cs, taskCallMethod,
		&taskCallParams{Name: tool, Arguments: args, Task: task})
	if err != nil {
		tc.t.Fatalf("task-augmented tools/call: %v", err)
	}
	return res.Task
}

func (tc *taskClient) get(id string) (*getTaskRes, error) {
	return mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctxT(tc.t), tc.cs, "tasks/get", &taskIDArgs{TaskID: id})
}

func (tc *taskClient) cancel(id string) (*getTaskRes, error) {
	return mcp.CallCustomMethod[*taskIDArgs, *getTaskRes](ctxT(tc.t), tc.cs, "tasks/cancel", &taskIDArgs{TaskID: id})
}

func (tc *taskClient) result(id string) (*taskResultRes, error) {
	return mcp.CallCustomMethod[*taskIDArgs, *taskResultRes](ctxT(tc.t), tc.cs, "tasks/result", &taskIDArgs{TaskID: id})
}

func (tc *taskClient) list() []wireTask {
	tc.t.Helper()
	res, err := mcp.CallCustomMethod[*listTasksArgs, *listTasksRes](ctxT(tc.t), tc.cs, "tasks/list", &listTasksArgs{})
	if err != nil {
		tc.t.Fatalf("tasks/list: %v", err)
	}
	return res.Tasks
}

// stepper is an invoker whose runs report a session and a message, signal
// on reached, and wait for a value on release (or their context's end).
type stepper struct {
	*stub
	reached chan struct{}
	release chan struct{}
	causes  chan error
}

func newStepper(name string) *stepper {
	s := &stepper{reached: make(chan struct{}, 10), release: make(chan struct{}, 10), causes: make(chan error, 10)}
	s.stub = &stub{name: name, fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "sess-step"})
		req.OnEvent(invoker.Event{Kind: invoker.KindMessage, Text: "half way through " + req.Prompt})
		s.reached <- struct{}{}
		select {
		case <-s.release:
			return &invoker.Result{SessionID: "sess-step", Text: "done: " + req.Prompt, Usage: invoker.Usage{InputTokens: 3}}, nil
		case <-ctx.Done():
			s.causes <- context.Cause(ctx)
			return &invoker.Result{SessionID: "sess-step", Text: "half way through " + req.Prompt, ExitCode: -1}, ctx.Err()
		}
	}}
	return s
}

func taskArgs(workdir, prompt string) map[string]any {
	return map[string]any{"prompt": prompt, "workdir": workdir}
}

// TestTaskLifecycle: a task-augmented call returns a working task at
// once, tasks/get shows the run's progress and text so far, tasks/result
// waits for the end and returns the structured output a plain call
// returns, tasks/list lists it, and cancelling it then is the spec's
// error.
func TestTaskLifecycle(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{ProgressInterval: time.Millisecond}, false, inv)
	c := s.dialTasks(t, "")
	dir := t.TempDir()

	task := c.create("agent", taskArgs(dir, "fix it"), map[string]any{"ttl": 60000})
	if task.Status != mcpadapter.TaskWorking || task.TaskID == "" || task.TTL == nil || *task.TTL != 60000 || task.PollInterval <= 0 {
		t.Fatalf("CreateTaskResult.task = %+v, want working, an id, ttl 60000, a poll interval", task)
	}
	<-inv.reached // the run is under way, and waits
	got, err := c.get(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	progress, _ := got.Meta["io.github.clinvoke/progress"].(map[string]any)
	if got.Status != mcpadapter.TaskWorking || progress["text"] != "half way through fix it" {
		t.Errorf("tasks/get = %+v (progress %v), want working with the text so far", got.wireTask, progress)
	}
	if ids := c.list(); len(ids) != 1 || ids[0].TaskID != task.TaskID {
		t.Errorf("tasks/list = %+v, want the task", ids)
	}

	inv.release <- struct{}{}
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	related, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if res.IsError || related["taskId"] != task.TaskID {
		t.Errorf("tasks/result isError=%v _meta=%v, want a result related to the task", res.IsError, res.Meta)
	}
	var viaTask mcpadapter.Output
	if err := json.Unmarshal(res.StructuredContent, &viaTask); err != nil {
		t.Fatal(err)
	}

	inv.release <- struct{}{}
	plain, err := c.cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent", Arguments: taskArgs(dir, "fix it")})
	if err != nil {
		t.Fatal(err)
	}
	var direct mcpadapter.Output
	decode(t, plain, &direct)
	viaTask.DurationMS, direct.DurationMS = 0, 0
	a, _ := json.Marshal(viaTask)
	b, _ := json.Marshal(direct)
	if !bytes.Equal(a, b) {
		t.Errorf("the task's output\n%s\ndiffers from a plain call's\n%s", a, b)
	}

	got, err = c.get(task.TaskID)
	if err != nil || got.Status != mcpadapter.TaskCompleted {
		t.Errorf("tasks/get after the end = %+v, %v; want completed", got, err)
	}
	_, err = c.cancel(task.TaskID)
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(jerr.Message, "terminal status 'completed'") {
		t.Errorf("tasks/cancel of a completed task: %v, want -32602 'already in terminal status'", err)
	}
}

// TestTaskCancel: tasks/cancel stops the run with ErrTaskCancelled as the
// cause before it answers, the task ends cancelled, and tasks/result
// returns the cancelled call's result with its partial text.
func TestTaskCancel(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{}, false, inv)
	c := s.dialTasks(t, "")
	task := c.create("agent", taskArgs(t.TempDir(), "long job"), map[string]any{})
	<-inv.reached
	got, err := c.cancel(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if got.Status != mcpadapter.TaskCancelled {
		t.Errorf("tasks/cancel = %+v, want cancelled", got.wireTask)
	}
	select {
	case cause := <-inv.causes:
		if !errors.Is(cause, mcpadapter.ErrTaskCancelled) {
			t.Errorf("the run's cancellation cause = %v, want ErrTaskCancelled", cause)
		}
	default:
		t.Fatal("tasks/cancel answered before the run ended")
	}
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	var out mcpadapter.Output
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || out.Status != mcpadapter.StatusCancelled || out.Text != "half way through long job" || !strings.Contains(out.Error, "cancelled by the client") {
		t.Errorf("tasks/result = isError %v, %+v; want the cancelled run's output", res.IsError, out)
	}
}

// TestTaskOutlivesConnection: the client that created the task goes away;
// the run goes on, and a new connection gets the result.
func TestTaskOutlivesConnection(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{}, false, inv)
	first := s.dialTasks(t, "")
	task := first.create("agent", taskArgs(t.TempDir(), "survive"), map[string]any{})
	<-inv.reached
	first.close() // DELETE of the session: a plain call would be cancelled

	inv.release <- struct{}{}
	second := s.dialTasks(t, "")
	res, err := second.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result on a new connection: %v", err)
	}
	var out mcpadapter.Output
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	if res.IsError || out.Text != "done: survive" {
		t.Errorf("tasks/result = %+v, want the run's answer", out)
	}
}

// TestTaskBelongsToItsIdentity: another identity's tasks/get,
// tasks/result and tasks/cancel get the error of a task that does not
// exist, and its tasks/list does not show the task.
func TestTaskBelongsToItsIdentity(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	rotate(t, file, "alice:"+aliceToken+"\nbob:"+bobToken+"\n")
	tokens, err := mcpadapter.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, false, inv)
	alice, bob := s.dialTasks(t, aliceToken), s.dialTasks(t, bobToken)
	task := alice.create("agent", taskArgs(t.TempDir(), "secret"), map[string]any{})
	<-inv.reached

	const missing = "AAAAAAAAAAAAAAAAAAAAAAAAAA"
	for name, call := range map[string]func(string) error{
		"tasks/get":    func(id string) error { _, err := bob.get(id); return err },
		"tasks/result": func(id string) error { _, err := bob.result(id); return err },
		"tasks/cancel": func(id string) error { _, err := bob.cancel(id); return err },
	} {
		want := strings.ReplaceAll(fmt.Sprint(call(missing)), missing, task.TaskID)
		var jerr *jsonrpc.Error
		if err := call(task.TaskID); !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeInvalidParams || err.Error() != want {
			t.Errorf("bob's %s of alice's task: %v, want the error of a task that does not exist: %v", name, err, want)
		}
	}
	if l := bob.list(); len(l) != 0 {
		t.Errorf("bob's tasks/list = %+v, want none", l)
	}
	if got, err := alice.get(task.TaskID); err != nil || got.Status != mcpadapter.TaskWorking {
		t.Errorf("alice's tasks/get = %+v, %v; want her working task", got, err)
	}
	inv.release <- struct{}{}
	if _, err := alice.result(task.TaskID); err != nil {
		t.Errorf("alice's tasks/result: %v", err)
	}
}

// TestTaskAbandoned: a task nobody asks about is cancelled after the
// bound, with ErrTaskAbandoned as the cause, and tasks/get says why.
func TestTaskAbandoned(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{Tasks: mcpadapter.TaskOptions{AbandonAfter: 50 * time.Millisecond}}, false, inv)
	c := s.dialTasks(t, "")
	task := c.create("agent", taskArgs(t.TempDir(), "forgotten"), map[string]any{})
	if cause := <-inv.causes; !errors.Is(cause, mcpadapter.ErrTaskAbandoned) {
		t.Errorf("the run's cancellation cause = %v, want ErrTaskAbandoned", cause)
	}
	if _, err := c.result(task.TaskID); err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	got, err := c.get(task.TaskID)
	if err != nil || got.Status != mcpadapter.TaskCancelled || !strings.Contains(got.StatusMessage, "abandoned") {
		t.Errorf("tasks/get = %+v, %v; want cancelled as abandoned", got, err)
	}
	b, err := os.ReadFile(s.transcript)
	if err != nil || !strings.Contains(string(b), "abandoned") {
		t.Errorf("the transcript does not say the run was abandoned (%v):\n%s", err, b)
	}
}

// TestTaskExpires: a finished task is deleted its ttl after its end.
func TestTaskExpires(t *testing.T) {
	inv := newStepper("agent")
	s := newAccessServer(t, &mcpadapter.Options{}, false, inv)
	c := s.dialTasks(t, "")
	task := c.create("agent", taskArgs(t.TempDir(), "brief"), map[string]any{"ttl": 1})
	<-inv.reached
	if got, err := c.get(task.TaskID); err != nil || got.Status != mcpadapter.TaskWorking {
		t.Fatalf("tasks/get of the running task = %+v, %v; want it working: the ttl counts from its end", got, err)
	}
	inv.release <- struct{}{}
	ctx := ctxT(t)
	for {
		_, err := c.get(task.TaskID)
		var jerr *jsonrpc.Error
		if errors.As(err, &jerr) && jerr.Code == jsonrpc.CodeInvalidParams {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the task is still there after its ttl: %v", err)
		}
	}
	if l := c.list(); len(l) != 0 {
		t.Errorf("tasks/list = %+v after the ttl, want none", l)
	}
}

// TestTaskCapabilities: initialize declares the tasks capability of
// 2025-11-25, and tools/list marks the adapter's tools as taking a task.
func TestTaskCapabilities(t *testing.T) {
	s := newAccessServer(t, &mcpadapter.Options{}, true, answer("agent"))
	post := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	_, body := s.do(t, rawRequest{method: http.MethodPost, path: "/", header: post,
		body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`})
	if !strings.Contains(body, `"tasks":{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`) {
		t.Errorf("initialize = %s, want the tasks capability", body)
	}
	_, body = s.do(t, rawRequest{method: http.MethodPost, path: "/", header: post, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`})
	if n := strings.Count(body, `"execution":{"taskSupport":"optional"}`); n != 2 {
		t.Errorf("tools/list marks %d tools as taking a task, want 2: %s", n, body)
	}
}

// cutOnce is an http.RoundTripper whose first response to a POST holding
// match ends, as if the connection dropped, right after its first SSE
// event (the priming event); cut is closed then.
type cutOnce struct {
	base  http.RoundTripper
	match string
	cut   chan struct{}
	done  bool
}

func (c *cutOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || c.done || !bytes.Contains(body, []byte(c.match)) {
		return resp, err
	}
	c.done = true
	resp.Body = &cutBody{rc: resp.Body, cut: c.cut}
	return resp, nil
}

type cutBody struct {
	rc   io.ReadCloser
	cut  chan struct{}
	seen []byte
	done bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.rc.Read(p)
	b.seen = append(b.seen, p[:n]...)
	if i := bytes.Index(b.seen, []byte("\n\n")); i >= 0 {
		b.done = true
		b.rc.Close()
		close(b.cut)
		keep := n - (len(b.seen) - (i + 2))
		return keep, nil
	}
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }

// TestTaskResultStreamResumes: with an event store, the SSE stream of a
// tasks/result that drops while the task runs is resumed by the client
// with Last-Event-ID, and the result reaches it; the priming event
// carries the retry field.
func TestTaskResultStreamResumes(t *testing.T) {
	inv := newStepper("agent")
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{SSERetry: 10 * time.Millisecond}, inv)
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	srv := httptest.NewServer(tools.Handler(h))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		for ss := range server.Sessions() { // the raw requests' session
			ss.Close()
		}
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v", err)
		}
	})
	s := &accessServer{url: srv.URL, tools: tools}

	// The priming event of a 2025-11-25 stream has an id and the retry
	// field, even for a request whose header names an older version.
	post := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	resp, body := s.do(t, rawRequest{method: http.MethodPost, path: "/", header: post,
		body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`})
	if !strings.HasPrefix(body, "event: prime\nretry: 10\nid: ") {
		t.Errorf("initialize's stream begins %q, want a priming event with retry: 10", body)
	}
	post["Mcp-Session-Id"], post["Mcp-Protocol-Version"] = resp.Header.Get("Mcp-Session-Id"), "2025-03-26"
	s.do(t, rawRequest{method: http.MethodPost, path: "/", header: post, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`})
	if _, body = s.do(t, rawRequest{method: http.MethodPost, path: "/", header: post, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`}); !strings.HasPrefix(body, "event: prime\nretry: 10\n") {
		t.Errorf("a 2025-11-25 session's ping with an older header: stream %q, want it primed", body)
	}

	cut := &cutOnce{base: taskCalls{base: http.DefaultTransport}, match: `"tasks/result"`, cut: make(chan struct{})}
	client := mcp.NewClient(&mcp.Implementation{Name: "task-client", Version: "v0.0.1"}, nil)
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: cut}, MaxRetries: 3},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	c := &taskClient{t: t, cs: cs}
	task := c.create("agent", taskArgs(t.TempDir(), "resume"), map[string]any{})
	<-inv.reached
	type outcome struct {
		res *taskResultRes
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := c.result(task.TaskID)
		got <- outcome{res, err}
	}()
	<-cut.cut // the stream of tasks/result dropped after its priming event
	inv.release <- struct{}{}
	o := <-got
	if o.err != nil {
		t.Fatalf("tasks/result over a dropped stream: %v", o.err)
	}
	var out mcpadapter.Output
	if err := json.Unmarshal(o.res.StructuredContent, &out); err != nil || out.Text != "done: resume" {
		t.Errorf("tasks/result over a resumed stream = %+v (%v), want the run's answer", out, err)
	}
}

// renaming is a client transport that sends taskCallMethod as tools/call.
type renaming struct{ mcp.Transport }

func (r renaming) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	return renamingConn{c}, err
}

type renamingConn struct{ mcp.Connection }

func (c renamingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == taskCallMethod {
		req.Method = "tools/call"
	}
	return c.Connection.Write(ctx, msg)
}

// TestTaskOverTransport: Tools.Transport serves tasks over a transport
// other than streamable HTTP (stdio's, here the SDK's in-memory one).
func TestTaskOverTransport(t *testing.T) {
	inv := newStepper("agent")
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, nil, inv)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctxT(t), tools.Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "task-client", Version: "v0.0.1"}, nil)
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := client.Connect(ctxT(t), renaming{ct}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	c := &taskClient{t: t, cs: cs}
	task := c.create("agent", taskArgs(t.TempDir(), "over stdio"), map[string]any{})
	<-inv.reached
	inv.release <- struct{}{}
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	var out mcpadapter.Output
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil || out.Text != "done: over stdio" {
		t.Errorf("tasks/result = %+v (%v), want the run's answer", out, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	ss.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := tools.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown() error = %v", err)
	}
}

// TestTaskInputRequired: an approval the run asks for under
// ApprovalsElicit moves the task to input_required with the question; the
// client's tasks/result takes the question, related to the task, and its
// answer reaches the run, whose task then completes.
func TestTaskInputRequired(t *testing.T) {
	inv := newAsker("agent")
	s := newAccessServer(t, &mcpadapter.Options{Approvals: mcpadapter.ApprovalsElicit}, false, inv)
	el := &elicitations{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}}
	client := mcp.NewClient(&mcp.Implementation{Name: "task-client", Version: "v0.0.1"}, &mcp.ClientOptions{ElicitationHandler: el.handle})
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *getTaskRes](client, "tasks/get"),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: taskCalls{base: http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	c := &taskClient{t: t, cs: cs}
	t.Cleanup(func() { c.close() })
	task := c.create("agent", taskArgs(t.TempDir(), "ask first"), map[string]any{})

	ctx := ctxT(t)
	for {
		got, err := c.get(task.TaskID)
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if got.Status == mcpadapter.TaskInputRequired {
			if !strings.Contains(got.StatusMessage, "touch made.txt") {
				t.Errorf("tasks/get = %+v, want the question as statusMessage", got.wireTask)
			}
			break
		}
		if ctx.Err() != nil || got.Status != mcpadapter.TaskWorking {
			t.Fatalf("tasks/get = %+v, want input_required", got.wireTask)
		}
	}
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	if d := <-inv.decided; !d.Allow {
		t.Errorf("the run's decision = %+v, want the client's allow", d)
	}
	if res.IsError {
		t.Errorf("tasks/result isError, want the completed run")
	}
	if el.count() != 1 {
		t.Fatalf("the client was asked %d times, want once", el.count())
	}
	related, _ := el.seen[0].Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if related["taskId"] != task.TaskID {
		t.Errorf("the elicitation's _meta = %v, want it related to the task", el.seen[0].Meta)
	}
	if got, err := c.get(task.TaskID); err != nil || got.Status != mcpadapter.TaskCompleted {
		t.Errorf("tasks/get after the answer = %+v, %v; want completed", got, err)
	}
}

// TestTaskAcrossReplicas: two stateless replicas share a task store; a
// task created on one is polled, cancelled and its result fetched on the
// other, and the run stops on the replica that runs it.
func TestTaskAcrossReplicas(t *testing.T) {
	store := mcpadapter.NewMemoryTaskStore()
	opts := func() *mcpadapter.Options {
		return &mcpadapter.Options{HeartbeatInterval: 5 * time.Millisecond, ProgressInterval: time.Millisecond,
			Tasks: mcpadapter.TaskOptions{Store: store, PollInterval: 5 * time.Millisecond}}
	}
	inv := newStepper("agent")
	one := newAccessServer(t, opts(), true, inv)
	two := newAccessServer(t, opts(), true, newStepper("agent"))
	c1, c2 := one.dialTasks(t, ""), two.dialTasks(t, "")

	task := c1.create("agent", taskArgs(t.TempDir(), "replicated"), map[string]any{})
	<-inv.reached
	if got, err := c2.get(task.TaskID); err != nil || got.Status != mcpadapter.TaskWorking {
		t.Fatalf("tasks/get on the other replica = %+v, %v; want working", got, err)
	}
	if l := c2.list(); len(l) != 1 || l[0].TaskID != task.TaskID {
		t.Errorf("tasks/list on the other replica = %+v, want the task", l)
	}
	got, err := c2.cancel(task.TaskID)
	if err != nil || got.Status != mcpadapter.TaskCancelled {
		t.Fatalf("tasks/cancel on the other replica = %+v, %v; want cancelled", got, err)
	}
	select {
	case cause := <-inv.causes:
		if !errors.Is(cause, mcpadapter.ErrTaskCancelled) {
			t.Errorf("the run's cancellation cause = %v, want ErrTaskCancelled", cause)
		}
	default:
		t.Fatal("tasks/cancel on the other replica answered before the run ended")
	}
	res, err := c2.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result on the other replica: %v", err)
	}
	var out mcpadapter.Output
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil || !res.IsError || out.Status != mcpadapter.StatusCancelled {
		t.Errorf("tasks/result on the other replica = %+v (%v), want the cancelled run's output", out, err)
	}
}

// cutStore is a TaskStore shared by replicas that cuts one of them off
// as a killed process is: once cut, nothing that replica saves arrives.
type cutStore struct {
	mcpadapter.TaskStore
	saves chan *mcpadapter.TaskRecord // what arrived, as it arrives

	mu  sync.Mutex
	cut bool
}

func (s *cutStore) Save(ctx context.Context, r *mcpadapter.TaskRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		return nil
	}
	select {
	case s.saves <- r:
	default:
	}
	return s.TaskStore.Save(ctx, r)
}

// kill cuts the replica off; no save of its is in flight when it returns.
func (s *cutStore) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = true
}

func TestTaskReplicaLost(t *testing.T) {
	store := mcpadapter.NewMemoryTaskStore()
	cut := &cutStore{TaskStore: store, saves: make(chan *mcpadapter.TaskRecord, 100)}
	const lease = 150 * time.Millisecond
	opts := func(s mcpadapter.TaskStore, replica string) *mcpadapter.Options {
		return &mcpadapter.Options{HeartbeatInterval: 5 * time.Millisecond, ProgressInterval: time.Millisecond,
			Tasks: mcpadapter.TaskOptions{Store: s, PollInterval: 5 * time.Millisecond, Lease: lease, Replica: replica}}
	}
	inv := newStepper("agent")
	one := newAccessServer(t, opts(cut, "replica-one"), true, inv)
	two := newAccessServer(t, opts(store, "replica-two"), true, newStepper("agent"))
	c1, c2 := one.dialTasks(t, ""), two.dialTasks(t, "")

	task := c1.create("agent", taskArgs(t.TempDir(), "replicated"), map[string]any{})
	<-inv.reached
	first, err := store.Load(context.Background(), task.TaskID)
	if err != nil || first.Replica != "replica-one" || first.LeaseUntil.IsZero() {
		t.Fatalf("the stored record = %+v, %v; want replica-one's, with a lease", first, err)
	}
	// The replica running the task renews its lease.
	for r := range cut.saves {
		if r.ID == task.TaskID && r.LeaseUntil.After(first.LeaseUntil) {
			break
		}
	}
	if got, err := c2.get(task.TaskID); err != nil || got.Status != mcpadapter.TaskWorking {
		t.Fatalf("tasks/get on the other replica while the lease is renewed = %+v, %v; want working", got, err)
	}

	// The replica is killed: its run never records its end, and its
	// lease is no longer renewed.
	cut.kill()
	last, err := store.Load(context.Background(), task.TaskID)
	if err != nil || last.Status != mcpadapter.TaskWorking {
		t.Fatalf("the stored record after the kill = %+v, %v; want working", last, err)
	}
	<-time.After(time.Until(last.LeaseUntil)) // the lease's end, the condition under test
	got, err := c2.get(task.TaskID)
	if err != nil || got.Status != mcpadapter.TaskFailed || !strings.Contains(got.StatusMessage, "replica-one") ||
		!strings.Contains(got.StatusMessage, mcpadapter.ErrTaskReplicaLost.Error()) {
		t.Fatalf("tasks/get on the other replica after the lease = %+v, %v; want failed, the lost replica named", got, err)
	}
	if l := c2.list(); len(l) != 1 || l[0].Status != mcpadapter.TaskFailed {
		t.Errorf("tasks/list on the other replica = %+v, want the task failed", l)
	}
	if _, err := c2.result(task.TaskID); err == nil || !strings.Contains(err.Error(), "stopped answering") {
		t.Errorf("tasks/result on the other replica = %v, want the lost replica's error", err)
	}
	if _, err := c2.cancel(task.TaskID); err == nil || !strings.Contains(err.Error(), "terminal status 'failed'") {
		t.Errorf("tasks/cancel on the other replica = %v, want the error of a failed task", err)
	}
	select {
	case <-inv.causes:
		t.Fatal("the killed replica's run ended: the test must simulate a replica that never records the end")
	default:
	}
}

// TestTaskOptionsRefused: task options that would break a task are refused
// by Register, naming the option and the fix.
func TestTaskOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts mcpadapter.TaskOptions
		want string
	}{
		{"negative ttl", mcpadapter.TaskOptions{TTL: -time.Second}, "Options.Tasks: TTL is -1s"},
		{"negative lease", mcpadapter.TaskOptions{Lease: -time.Second}, "Options.Tasks: Lease is -1s"},
		{"lease too short to renew", mcpadapter.TaskOptions{Lease: 2 * time.Nanosecond}, "Options.Tasks: Lease is 2ns: give a duration of at least 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			_, err := mcpadapter.Register(s, &mcpadapter.Options{Tasks: tc.opts}, answer("agent"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register with %+v: %v, want an error containing %q", tc.opts, err, tc.want)
			}
		})
	}
}
