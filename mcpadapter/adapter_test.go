package mcpadapter_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// capStub is a stub that declares the capabilities of a real backend.
type capStub struct {
	*stub
	caps invoker.Capabilities
}

func (s capStub) Capabilities() invoker.Capabilities { return s.caps }

func TestListTools(t *testing.T) {
	claudeCaps := claude.New().Capabilities()
	h := newHarness(t, &mcpadapter.Options{DefaultPermission: invoker.WorkspaceWrite, MaxPermission: invoker.Unlimited},
		answer("codex"), capStub{answer("claude"), claudeCaps})
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools() error = %v", err)
	}
	var names []string
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		tools[tl.Name] = tl
	}
	slices.Sort(names)
	if want := []string{"claude", "claude_parallel", "codex", "codex_parallel"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	type prop struct {
		Type    any      `json:"type"` // a name, or a list of names (a slice may be null)
		Enum    []string `json:"enum"`
		Default any      `json:"default"`
	}
	type schema struct {
		Type       string          `json:"type"`
		Required   []string        `json:"required"`
		Properties map[string]prop `json:"properties"`
	}
	var in, out schema
	remarshal(t, tools["codex"].InputSchema, &in)
	remarshal(t, tools["codex"].OutputSchema, &out)
	if in.Type != "object" || !slices.Equal(in.Required, []string{"prompt", "workdir"}) {
		t.Errorf("codex input schema: type %q, required %v; want object, [prompt workdir]", in.Type, in.Required)
	}
	perm := in.Properties["permission"]
	if want := []string{"read-only", "workspace-write", "unlimited"}; !slices.Equal(perm.Enum, want) {
		t.Errorf("permission enum = %v, want %v", perm.Enum, want)
	}
	if perm.Default != "workspace-write" {
		t.Errorf("permission default = %v, want workspace-write", perm.Default)
	}
	for _, p := range []string{"prompt", "workdir", "permission", "model", "session_id", "system_prompt", "images"} {
		if _, ok := in.Properties[p]; !ok {
			t.Errorf("codex input schema lacks %q", p)
		}
	}
	var claudeIn schema
	remarshal(t, tools["claude"].InputSchema, &claudeIn)
	if _, ok := claudeIn.Properties["images"]; ok {
		t.Errorf("claude input schema offers images, which Claude Code cannot take")
	}
	if _, ok := claudeIn.Properties["system_prompt"]; !ok {
		t.Errorf("claude input schema lacks system_prompt, which Claude Code takes")
	}
	for _, p := range []string{"text", "session_id", "exit_code", "duration_ms", "usage", "status"} {
		if _, ok := out.Properties[p]; !ok {
			t.Errorf("codex output schema lacks %q", p)
		}
	}
	if a := tools["codex"].Annotations; a == nil || a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("codex annotations = %+v, want not read-only, open world", a)
	}
	if d := tools["codex"].Description; !strings.Contains(d, "session_id") {
		t.Errorf("codex description does not explain session_id: %q", d)
	}

	var par schema
	remarshal(t, tools["codex_parallel"].InputSchema, &par)
	if _, ok := par.Properties["fail_fast"]; !ok || !slices.Equal(par.Required, []string{"tasks"}) {
		t.Errorf("codex_parallel input schema = %+v, want tasks required and fail_fast", par)
	}
}

func TestPermissionCeilingInSchema(t *testing.T) {
	h := newHarness(t, nil, answer("codex"))
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools() error = %v", err)
	}
	var in struct {
		Properties map[string]struct {
			Enum    []string `json:"enum"`
			Default string   `json:"default"`
		} `json:"properties"`
	}
	remarshal(t, res.Tools[0].InputSchema, &in)
	perm := in.Properties["permission"]
	if want := []string{"read-only", "workspace-write"}; !slices.Equal(perm.Enum, want) || perm.Default != "read-only" {
		t.Errorf("default options: permission enum %v default %q, want %v default read-only", perm.Enum, perm.Default, want)
	}

	// A level above the ceiling is refused before the invoker is called.
	var out mcpadapter.Output
	r := h.call(context.Background(), t, "codex", args("hi", t.TempDir(), "permission", "unlimited"), &out)
	if !r.IsError {
		t.Errorf("permission unlimited above the ceiling: IsError = false, want true")
	}
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func TestCallReturnsStructuredOutput(t *testing.T) {
	inv := answer("codex")
	h := newHarness(t, nil, inv)
	dir := t.TempDir()
	var out mcpadapter.Output
	res := h.call(context.Background(), t, "codex", args("hello", dir, "model", "m1", "session_id", testSessionID), &out)
	if res.IsError {
		t.Fatalf("IsError = true, content %v", res.Content)
	}
	want := mcpadapter.Output{Status: "completed", Text: "echo: hello", SessionID: "sess-codex",
		Usage: invoker.Usage{InputTokens: 10, OutputTokens: 5}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("output = %+v, want %+v", out, want)
	}
	req := inv.lastRequest(t)
	realDir, _ := filepath.EvalSymlinks(dir)
	if req.Prompt != "hello" || req.Workdir != realDir || req.Permission != invoker.ReadOnly || req.Model != "m1" || req.SessionID != testSessionID {
		t.Errorf("request = %+v", req)
	}
}

// testSessionID has the shape of the session ids the CLIs emit.
const testSessionID = "0199a213-81c0-7800-8aa1-bbab2a035a53"

// TestSessionIDMustBeUUID checks that only session ids of the shape the
// CLIs emit are passed on: their resume flags also take "latest", indexes,
// names and search terms, which would reach other clients' sessions.
func TestSessionIDMustBeUUID(t *testing.T) {
	inv := answer("gemini")
	h := newHarness(t, nil, inv)
	dir := t.TempDir()
	for _, id := range []string{
		"latest", "1", "-1", "my-thread", "fix the tests",
		"0199a213-81c0-7800-8aa1-bbab2a035a5",    // one digit short
		"0199a213-81c0-7800-8aa1-bbab2a035a53\n", // trailing newline
		"0199a21381c078008aa1bbab2a035a53",       // no dashes
		"--help",
	} {
		n := inv.calls.Load()
		res := h.call(context.Background(), t, "gemini", args("hi", dir, "session_id", id), nil)
		if !res.IsError || inv.calls.Load() != n {
			t.Errorf("session_id %q: IsError %v, invoker called %v; want refused without starting", id, res.IsError, inv.calls.Load() != n)
		}
		res = h.call(context.Background(), t, "gemini_parallel", map[string]any{"workdir": dir,
			"tasks": []map[string]any{{"prompt": "a"}, {"prompt": "b", "session_id": id}}}, nil)
		if !res.IsError || inv.calls.Load() != n {
			t.Errorf("parallel task with session_id %q: IsError %v, invoker called %v; want refused without starting", id, res.IsError, inv.calls.Load() != n)
		}
	}
	for _, id := range []string{testSessionID, "C0FFEE00-1234-4ABC-8DEF-0123456789AB"} {
		res := h.call(context.Background(), t, "gemini", args("hi", dir, "session_id", id), nil)
		if res.IsError {
			t.Errorf("session_id %q: IsError, content %v; want accepted", id, res.Content)
		} else if got := inv.lastRequest(t).SessionID; got != id {
			t.Errorf("session_id %q: Request.SessionID = %q", id, got)
		}
	}
}

func TestFailedRunIsErrorWithPartialResult(t *testing.T) {
	exitErr := &invoker.ExitError{ExitCode: 1, Stderr: "boom"}
	inv := &stub{name: "claude", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		return &invoker.Result{SessionID: "s-42", Text: "half an answer", ExitCode: 1, Duration: 1500 * time.Millisecond},
			fmt.Errorf("claude: %w", exitErr)
	}}
	h := newHarness(t, nil, inv)
	var out mcpadapter.Output
	res := h.call(context.Background(), t, "claude", args("hello", t.TempDir()), &out)
	if !res.IsError {
		t.Fatalf("IsError = false, want true")
	}
	if out.Status != "failed" || out.Text != "half an answer" || out.SessionID != "s-42" || out.ExitCode != 1 || out.DurationMS != 1500 {
		t.Errorf("output = %+v", out)
	}
	if !strings.Contains(out.Error, "exit status 1") || !strings.Contains(out.Resume, `session_id "s-42"`) {
		t.Errorf("error %q, resume %q: want the exit status and how to resume", out.Error, out.Resume)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, `session_id "s-42"`) {
		t.Errorf("error text %q does not say how to resume", text)
	}
}

func TestProgress(t *testing.T) {
	release := make(chan struct{})
	inv := &stub{name: "codex", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "s-1"})
		req.OnEvent(invoker.Event{Kind: invoker.KindToolCall, Tool: &invoker.Tool{Name: "command_execution", Input: json.RawMessage(`{"command":"echo hello"}`)}})
		select { // the run goes on until the client has seen its progress
		case <-release:
		case <-ctx.Done():
			return &invoker.Result{}, ctx.Err()
		}
		req.OnEvent(invoker.Event{Kind: invoker.KindMessage, Text: "hello"})
		return &invoker.Result{SessionID: "s-1", Text: "hello"}, nil
	}}
	h := newHarness(t, &mcpadapter.Options{ProgressInterval: time.Nanosecond}, inv)
	dir := t.TempDir()

	t.Run("with token", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult)
		go func() {
			params := &mcp.CallToolParams{Name: "codex", Arguments: args("hi", dir)}
			params.SetProgressToken("tok-1")
			res, err := h.cs.CallTool(context.Background(), params)
			if err != nil {
				t.Errorf("CallTool() error = %v", err)
			}
			done <- res
		}()
		var last float64
		for seen := false; !seen; {
			p := <-h.progress
			if p.ProgressToken != "tok-1" {
				t.Errorf("progress token = %v, want tok-1", p.ProgressToken)
			}
			if p.Progress <= last {
				t.Errorf("progress %v after %v: not increasing", p.Progress, last)
			}
			last = p.Progress
			seen = strings.Contains(p.Message, "running: echo hello")
		}
		close(release)
		if res := <-done; res == nil || res.IsError {
			t.Errorf("result = %+v, want success", res)
		}
	})

	t.Run("without token", func(t *testing.T) {
		before := h.sent.Load()
		var out mcpadapter.Output
		h.call(context.Background(), t, "codex", args("hi", dir), &out)
		// The handler has returned, and with it the reporter's goroutine:
		// whatever the server was going to send for this call, it has sent.
		if n := h.sent.Load() - before; n != 0 {
			t.Errorf("server sent %d progress notifications for a call without a progress token", n)
		}
	})
}

func TestClientCancelCancelsRunAndSessionGoesOn(t *testing.T) {
	b := newBlocker("codex")
	h := newHarness(t, nil, b)
	h.abandon()
	dir := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: args("hi", dir)})
		errc <- err
	}()
	<-b.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool() error = %v, want context.Canceled", err)
	}
	if cause := <-b.cancelled; !errors.Is(cause, context.Canceled) {
		t.Errorf("the run's context ended with %v, want context.Canceled", cause)
	}

	// The same session serves the next call.
	var out mcpadapter.Output
	if res := h.call(context.Background(), t, "codex", args("answer: again", dir), &out); res.IsError || out.Text != "echo: answer: again" {
		t.Errorf("call after a cancel: IsError %v, output %+v", res.IsError, out)
	}
}

func TestRandomCancelsLeaveServerServing(t *testing.T) {
	const calls, slots = 50, 3
	b := newBlocker("codex")
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: slots}, b)
	h.abandon()
	dir := t.TempDir()

	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			// Cancel at a random moment: before the request is sent, while
			// it waits for a slot, or while the run is going.
			stop := time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
			defer stop.Stop()
			defer cancel()
			_, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: args(fmt.Sprint("call ", i), dir)})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("CallTool() error = %v, want nil or context.Canceled", err)
			}
		}()
	}
	wg.Wait()

	// Every slot is free again: slots new runs start together. A run
	// cancelled while its handler was still finishing may hold a slot a
	// little longer, so the new calls may wait for it, but they must all
	// start.
	ctx, cancel := context.WithCancel(context.Background())
	var got sync.WaitGroup
	for range slots {
		got.Add(1)
		go func() {
			defer got.Done()
			h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: args("after", dir)})
		}()
	}
	for n := 0; n < slots; {
		if req := <-b.started; req.Prompt == "after" {
			n++
		}
	}
	cancel()
	got.Wait()
}

// cutTransport is a client transport whose connection can be cut, as when
// the client process dies: the server reads end of file.
type cutTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (c *cutTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	c.conn = conn
	return conn, err
}

// TestConnectionEndCancelsRun cuts the client's connection during a run:
// the server sees end of file (for stdio: its standard input closes), which
// must cancel the run. ClientSession.Close would not do: it waits for the
// calls in flight to return first.
func TestConnectionEndCancelsRun(t *testing.T) {
	b := newBlocker("codex")
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	if _, err := mcpadapter.Register(server, nil, b); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutTransport{Transport: ct}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil).Connect(context.Background(), cut, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())})
		errc <- err
	}()
	<-b.started
	if err := cut.conn.Close(); err != nil {
		t.Fatalf("closing the client's connection: %v", err)
	}
	// The SDK cancels the handler with the read error as the cause.
	if cause := <-b.cancelled; !errors.Is(cause, io.EOF) && !errors.Is(cause, context.Canceled) {
		t.Errorf("the run's context ended with %v, want io.EOF or context.Canceled", cause)
	}
	if err := <-errc; err == nil {
		t.Errorf("CallTool() on a cut connection: error = nil, want the connection's end")
	}
	// Teardown: the client's connection is already closed, which is the
	// one error its Close may report; the server session ends cleanly.
	if err := cs.Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("ClientSession.Close() error = %v, want nil or io.ErrClosedPipe", err)
	}
	if err := ss.Wait(); err != nil {
		t.Errorf("ServerSession.Wait() error = %v", err)
	}
}

func TestServerStopCancelsRuns(t *testing.T) {
	b := newBlocker("codex")
	h := newHarness(t, nil, b)

	done := make(chan *mcp.CallToolResult)
	go func() {
		res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())})
		if err != nil {
			t.Errorf("CallTool() error = %v", err)
		}
		done <- res
	}()
	<-b.started
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := h.tools.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown() error = %v", err)
	}
	if cause := <-b.cancelled; !errors.Is(cause, mcpadapter.ErrShuttingDown) {
		t.Errorf("the run's context ended with %v, want ErrShuttingDown", cause)
	}
	res := <-done
	var out mcpadapter.Output
	decode(t, res, &out)
	if !res.IsError || out.Status != "cancelled" || out.Text != "partial" || out.SessionID != "sess-blocked" {
		t.Errorf("result: IsError %v, output %+v; want a cancelled result with the partial text", res.IsError, out)
	}

	// Calls after the shutdown are refused without starting anything.
	n := b.calls.Load()
	out = mcpadapter.Output{}
	res = h.call(context.Background(), t, "codex", args("late", t.TempDir()), &out)
	if !res.IsError || b.calls.Load() != n || out.Status != "refused" || out.Error != "the server is shutting down" {
		t.Errorf("call after shutdown: IsError %v, invoker calls %d → %d, output %+v; want refused, the server is shutting down",
			res.IsError, n, b.calls.Load(), out)
	}
	var pout mcpadapter.ParallelOutput
	res = h.call(context.Background(), t, "codex_parallel", map[string]any{"workdir": t.TempDir(),
		"tasks": []map[string]any{{"prompt": "late"}, {"prompt": "later"}}}, &pout)
	if !res.IsError || b.calls.Load() != n || len(pout.Results) != 0 || !strings.Contains(errorText(res), "refused, nothing was started: the server is shutting down") {
		t.Errorf("parallel call after shutdown: IsError %v, invoker calls %d → %d, output %+v, content %q; want refused, no results",
			res.IsError, n, b.calls.Load(), pout, errorText(res))
	}
}

// errorText returns the text of a result's first content.
func errorText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestServerRunStops checks the way to stop a server that the package
// documentation shows: Shutdown starts when Server.Run's context is done.
// Run returns only after the run in flight was cancelled, and Shutdown
// once it is recorded.
func TestServerRunStops(t *testing.T) {
	b := newBlocker("codex")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		stopped <- tools.Shutdown(context.Background())
	}()
	ct, st := mcp.NewInMemoryTransports()
	runErr := make(chan error)
	go func() { runErr <- server.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())})
		callErr <- err
	}()
	<-b.started
	stop()
	<-b.cancelled
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Errorf("Server.Run() error = %v, want context.Canceled", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown() error = %v", err)
	}
	if n := tools.Active(); n != 0 {
		t.Errorf("Active() = %d after Shutdown, want 0", n)
	}
	// The server closed the connection, possibly before the result was
	// written; either outcome is fine for the call.
	<-callErr
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	const limit = 2
	b := newBlocker("codex")
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: limit, ProgressInterval: time.Nanosecond}, b)
	h.abandon()
	dir := t.TempDir()

	var wg sync.WaitGroup
	defer wg.Wait()
	call := func(prompt string, token any) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := &mcp.CallToolParams{Name: "codex", Arguments: args(prompt, dir)}
			if token != nil {
				params.SetProgressToken(token)
			}
			h.cs.CallTool(ctx, params)
		}()
		return cancel
	}
	cancelFirst := call("first", nil)
	defer cancelFirst()
	<-b.started
	defer call("second", nil)()
	<-b.started
	defer call("third", "tok-3")()
	// The third call reports that it waits, which it does only after
	// failing to take a slot.
	for p := range h.progress {
		if p.ProgressToken == "tok-3" && strings.Contains(p.Message, "queued") {
			break
		}
	}
	select {
	case req := <-b.started:
		t.Fatalf("%q started while %d runs held every slot", req.Prompt, limit)
	default:
	}
	// Ending one run frees its slot for the third.
	cancelFirst()
	if req := <-b.started; req.Prompt != "third" {
		t.Errorf("started %q, want third", req.Prompt)
	}
}

func TestConcurrencyLimitFreesSlot(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 10)
	inv := &stub{name: "codex", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		started <- req.Prompt
		if req.Prompt == "first" {
			<-release
		}
		return &invoker.Result{Text: req.Prompt}, nil
	}}
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: 1, ProgressInterval: time.Nanosecond}, inv)
	dir := t.TempDir()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		h.call(context.Background(), t, "codex", args("first", dir), nil)
	}()
	if p := <-started; p != "first" {
		t.Fatalf("started %q, want first", p)
	}
	go func() {
		defer wg.Done()
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("second", dir)}
		params.SetProgressToken("tok-2")
		if _, err := h.cs.CallTool(context.Background(), params); err != nil {
			t.Errorf("CallTool() error = %v", err)
		}
	}()
	// The wait is told as a wait for the host's Budget is ("queued, 2
	// ahead"), saying what for.
	for p := range h.progress {
		if p.ProgressToken == "tok-2" && strings.Contains(p.Message, "queued") {
			if want := "queued, 0 ahead for one of this server's 1 run at once"; p.Message != want {
				t.Errorf("progress %q, want %q", p.Message, want)
			}
			break
		}
	}
	select {
	case p := <-started:
		t.Fatalf("%q started while the only slot was held", p)
	default:
	}
	close(release)
	if p := <-started; p != "second" {
		t.Errorf("started %q, want second", p)
	}
	wg.Wait()
}

func TestPanicInRunDoesNotKillServer(t *testing.T) {
	inv := &stub{name: "gemini", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		if req.Prompt == "panic" {
			req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "s-p"})
			req.OnEvent(invoker.Event{Kind: invoker.KindMessage, Text: "so far"})
			panic("decoder exploded")
		}
		return &invoker.Result{Text: "fine"}, nil
	}}
	h := newHarness(t, nil, inv)
	dir := t.TempDir()
	var out mcpadapter.Output
	res := h.call(context.Background(), t, "gemini", args("panic", dir), &out)
	if !res.IsError || out.Status != "failed" || !strings.Contains(out.Error, "decoder exploded") {
		t.Errorf("panicking run: IsError %v, output %+v", res.IsError, out)
	}
	if out.SessionID != "s-p" || out.Text != "so far" {
		t.Errorf("panicking run: session %q text %q, want what its events reported", out.SessionID, out.Text)
	}
	res = h.call(context.Background(), t, "gemini", args("ok", dir), &out)
	if res.IsError || out.Text != "fine" {
		t.Errorf("call after a panic: IsError %v, output %+v", res.IsError, out)
	}
	// The parallel tool recovers each task's panic.
	var pout mcpadapter.ParallelOutput
	res = h.call(context.Background(), t, "gemini_parallel", map[string]any{
		"workdir": dir,
		"tasks":   []map[string]any{{"prompt": "panic"}, {"prompt": "ok"}},
	}, &pout)
	if res.IsError || pout.Completed != 1 || pout.Failed != 1 || pout.Results[0].Status != "failed" {
		t.Errorf("parallel call with a panicking task: IsError %v, output %+v", res.IsError, pout)
	}
}

func TestWorkdirOutsideRootsRefused(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	inside := filepath.Join(root, "proj")
	outside := filepath.Join(base, "other")
	sibling := filepath.Join(base, "rootx") // shares the root's prefix, is not under it
	for _, d := range []string{inside, outside, sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inv := answer("codex")
	h := newHarness(t, &mcpadapter.Options{Roots: []string{root}}, inv)

	for _, tc := range []struct {
		workdir string
		ok      bool
	}{
		{root, true},
		{inside, true},
		{inside + "/../proj/.", true},
		{filepath.Join(base, "alias"), true}, // a link from outside to inside resolves inside
		{outside, false},
		{sibling, false},
		{filepath.Join(root, "escape"), false}, // a link from inside to outside resolves outside
		// ".." after a link is taken from the link's target, as the
		// kernel takes it (and the judge of an agent's paths): base.
		{filepath.Join(root, "escape") + "/..", false},
		{filepath.Join(root, "..", "other"), false},
		{"proj", false}, // relative
		{"", false},     // missing
		{filepath.Join(root, "nope"), false},
		{filepath.Join(root, "file"), false}, // not a directory
	} {
		n := inv.calls.Load()
		var out mcpadapter.Output
		res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", tc.workdir)})
		if err != nil {
			t.Fatalf("CallTool(workdir %q) error = %v", tc.workdir, err)
		}
		decode(t, res, &out)
		started := inv.calls.Load() > n
		if tc.ok && (res.IsError || !started) {
			t.Errorf("workdir %q: IsError %v, started %v; want accepted (%+v)", tc.workdir, res.IsError, started, out)
		}
		if !tc.ok && (!res.IsError || started || out.Status != "refused") {
			t.Errorf("workdir %q: IsError %v, started %v, status %q; want refused without starting", tc.workdir, res.IsError, started, out.Status)
		}
	}
	// The run gets the resolved path.
	h.call(context.Background(), t, "codex", args("hi", filepath.Join(base, "alias")), nil)
	realInside, _ := filepath.EvalSymlinks(inside)
	if got := inv.lastRequest(t).Workdir; got != realInside {
		t.Errorf("Request.Workdir = %q, want the resolved %q", got, realInside)
	}
	// Images must lie under the roots too.
	if err := os.WriteFile(filepath.Join(outside, "secret.png"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := inv.calls.Load()
	res := h.call(context.Background(), t, "codex", args("hi", inside, "images", []string{filepath.Join(outside, "secret.png")}), nil)
	if !res.IsError || inv.calls.Load() != n {
		t.Errorf("image outside the roots: IsError %v, want refused without starting", res.IsError)
	}
}

func TestTranscriptConcurrent(t *testing.T) {
	const calls = 20
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	h := newHarness(t, &mcpadapter.Options{TranscriptPath: path, MaxConcurrent: -1}, answer("codex"), newBlocker("claude"))
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.call(context.Background(), t, "codex", args(fmt.Sprintf("prompt %d %s", i, strings.Repeat("x", 10000)), dir), nil)
		}()
	}
	wg.Wait()
	// A refused call is recorded too.
	h.call(context.Background(), t, "claude", args("refused", "relative"), nil)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e mcpadapter.TranscriptEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("transcript line %.80q: %v", sc.Text(), err)
		}
		if seen[e.Prompt] {
			t.Errorf("prompt %.20q recorded twice", e.Prompt)
		}
		seen[e.Prompt] = true
		switch {
		case e.Prompt == "refused":
			if e.Status != "refused" || e.CLI != "claude" {
				t.Errorf("refused call recorded as %+v", e)
			}
		case e.Status != "completed" || e.Text != "echo: "+e.Prompt || e.SessionID != "sess-codex" || e.Tool != "codex":
			t.Errorf("entry %+.200v", e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != calls+1 {
		t.Errorf("transcript has %d entries, want %d", len(seen), calls+1)
	}
}

func TestParallel(t *testing.T) {
	inv := &stub{name: "codex", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		if req.Prompt == "fail" {
			return &invoker.Result{SessionID: "s-fail", Text: "oops", ExitCode: 2}, &invoker.ExitError{ExitCode: 2}
		}
		return &invoker.Result{SessionID: "s-" + req.Prompt, Text: "did " + req.Prompt + " in " + filepath.Base(req.Workdir) + " as " + string(req.Permission)}, nil
	}}
	h := newHarness(t, nil, inv)
	dir, other := t.TempDir(), t.TempDir()
	var out mcpadapter.ParallelOutput
	res := h.call(context.Background(), t, "codex_parallel", map[string]any{
		"workdir":    dir,
		"permission": "workspace-write",
		"tasks": []map[string]any{
			{"prompt": "a"},
			{"prompt": "fail"},
			{"prompt": "b", "workdir": other, "permission": "read-only"},
		},
	}, &out)
	if res.IsError {
		t.Fatalf("IsError = true with completed tasks: %v", res.Content)
	}
	if out.Completed != 2 || out.Failed != 1 || len(out.Results) != 3 {
		t.Fatalf("output = %+v", out)
	}
	want := []struct {
		status    mcpadapter.Status
		sid, text string
	}{
		{"completed", "s-a", "did a in " + filepath.Base(dir) + " as workspace-write"},
		{"failed", "s-fail", "oops"},
		{"completed", "s-b", "did b in " + filepath.Base(other) + " as read-only"},
	}
	for i, w := range want {
		r := out.Results[i]
		if r.Index != i || r.Status != w.status || r.SessionID != w.sid || r.Text != w.text {
			t.Errorf("results[%d] = %+v, want %+v", i, r, w)
		}
	}
}

func TestParallelFailFast(t *testing.T) {
	slowStarted := make(chan struct{})
	inv := &stub{name: "codex", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		switch req.Prompt {
		case "fail":
			// Fail only once the sibling runs, so that fail_fast has
			// something to cancel.
			<-slowStarted
			return &invoker.Result{ExitCode: 1}, &invoker.ExitError{ExitCode: 1}
		case "slow":
			close(slowStarted)
		}
		<-ctx.Done()
		return &invoker.Result{SessionID: "s-" + req.Prompt, Text: "partial " + req.Prompt, ExitCode: -1}, ctx.Err()
	}}
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: 2}, inv)
	var out mcpadapter.ParallelOutput
	res := h.call(context.Background(), t, "codex_parallel", map[string]any{
		"workdir":   t.TempDir(),
		"fail_fast": true,
		"tasks":     []map[string]any{{"prompt": "fail"}, {"prompt": "slow"}, {"prompt": "never"}},
	}, &out)
	if !res.IsError {
		t.Errorf("IsError = false with no completed task")
	}
	if out.Failed != 1 || out.Cancelled != 2 {
		t.Errorf("output = %+v, want 1 failed, 2 cancelled", out)
	}
	if r := out.Results[1]; r.Status != "cancelled" || r.Text != "partial slow" || r.SessionID != "s-slow" || !strings.Contains(r.Error, "task 0 failed") {
		t.Errorf("running sibling: %+v, want cancelled because task 0 failed, with its partial text", r)
	}
	if r := out.Results[2]; r.Status != "cancelled" {
		t.Errorf("waiting sibling: %+v, want cancelled", r)
	}
	if n := inv.calls.Load(); n != 2 {
		t.Errorf("invoker called %d times, want 2 (the third task never starts)", n)
	}
}

// A run that waits for the host's budget shows it in its progress
// ("queued, 2 ahead"), and its Output (and transcript line) carry the wait
// and what the run used.
func TestQueuedProgressAndResources(t *testing.T) {
	used := invoker.Resources{PeakMemory: 300 << 20, CPUTime: 2 * time.Second, PeakProcesses: 12, OOMKills: 1}
	release := make(chan struct{})
	inv := &stub{name: "claude", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		req.OnEvent(invoker.Event{Kind: invoker.KindQueued, Ahead: 2, Text: "queued: 2 ahead"})
		select { // the wait goes on until the client has seen it
		case <-release:
		case <-ctx.Done():
			return &invoker.Result{}, ctx.Err()
		}
		req.OnEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "s-q"})
		return &invoker.Result{SessionID: "s-q", Text: "done", Queued: 1500 * time.Millisecond, Resources: used}, nil
	}}
	transcript := filepath.Join(t.TempDir(), "runs.jsonl")
	h := newHarness(t, &mcpadapter.Options{ProgressInterval: time.Nanosecond, TranscriptPath: transcript}, inv)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "claude", Arguments: args("hi", t.TempDir())}
		params.SetProgressToken("tok-q")
		res, err := h.cs.CallTool(context.Background(), params)
		if err != nil {
			t.Errorf("CallTool() error = %v", err)
		}
		done <- res
	}()
	for p := range h.progress {
		if p.Message == "queued, 2 ahead" {
			break
		}
	}
	close(release)
	res := <-done
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.QueuedMS != 1500 || out.Resources != used {
		t.Errorf("output queued_ms %d, resources %+v; want 1500 and %+v", out.QueuedMS, out.Resources, used)
	}
	lines, err := os.ReadFile(transcript)
	if err != nil || !strings.Contains(string(lines), `"queued_ms":1500`) || !strings.Contains(string(lines), `"peak_memory":314572800`) {
		t.Errorf("transcript %s (%v): want the wait and the resources", lines, err)
	}
}
