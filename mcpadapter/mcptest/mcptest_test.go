package mcptest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
	"github.com/clinvoke/clinvoke/mcpadapter/mcptest"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the Agents of the tests and examples are this binary
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// newServer registers invokers on a new server.
func newServer(t *testing.T, opts *mcpadapter.Options, invokers ...invoker.Invoker) (*mcp.Server, *mcpadapter.Tools) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "under-test", Version: "v0"}, nil)
	tools, err := mcpadapter.Register(server, opts, invokers...)
	if err != nil {
		t.Fatal(err)
	}
	return server, tools
}

// TestCall: Call and CallParallel decode what the real backends answer,
// through the adapter, for a success and a failure alike.
func TestCall(t *testing.T) {
	ok := codex.New(invokertest.Agent{Answer: "All good.", SessionID: "0c7d2a4e-5f61-4b8a-9c3d-7e2f1a0b9c84"}.Options())
	fail := claude.New(invokertest.Agent{CLI: "claude", Answer: "Half", Fail: "model overloaded"}.Options())
	server, tools := newServer(t, nil, ok, fail)
	c := mcptest.Connect(t, server, tools, nil)
	ctx := t.Context()
	dir := t.TempDir()

	out, err := c.Call(ctx, "codex", mcpadapter.Input{Prompt: "Check it.", Workdir: dir})
	if err != nil || out.Status != mcpadapter.StatusCompleted || out.Text != "All good." || out.SessionID != "0c7d2a4e-5f61-4b8a-9c3d-7e2f1a0b9c84" {
		t.Errorf("Call(codex) = %+v, %v; want the agent's answer and session", out, err)
	}
	out, err = c.Call(ctx, "claude", map[string]any{"prompt": "Check it.", "workdir": dir})
	if err != nil || out.Status != mcpadapter.StatusFailed || !strings.Contains(out.Error, "model overloaded") {
		t.Errorf("Call(claude) = %+v, %v; want a failed run saying why, and no error", out, err)
	}
	out, err = c.Call(ctx, "codex", mcpadapter.Input{Prompt: "Check it.", Workdir: "relative"})
	if err != nil || out.Status != mcpadapter.StatusRefused {
		t.Errorf("Call(codex, relative workdir) = %+v, %v; want a refusal and no error", out, err)
	}
	pout, err := c.CallParallel(ctx, "codex"+mcpadapter.ParallelSuffix, mcpadapter.ParallelInput{
		Workdir: dir, Tasks: []mcpadapter.Input{{Prompt: "one"}, {Prompt: "two"}},
	})
	if err != nil || pout.Completed != 2 || len(pout.Results) != 2 || pout.Results[1].Text != "All good." {
		t.Errorf("CallParallel() = %+v, %v; want two completed tasks", pout, err)
	}
	if _, err := c.Call(ctx, "nosuchtool", mcpadapter.Input{Prompt: "x", Workdir: dir}); err == nil {
		t.Error("Call(nosuchtool) error = nil, want the protocol's error")
	}
}

// TestCancel: with an Invoker, a test cancels a call once its agent runs,
// without waiting for a progress notification; once Wait returns, nothing
// the agent started is alive.
func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		warm bool // the call runs as a turn of a warm session
	}{{"run", false}, {"warm session", true}} {
		t.Run(tc.name, func(t *testing.T) {
			agent := invokertest.Agent{CLI: "claude", Answer: "Half an", Stall: time.Hour, LeaveBehind: true}
			inv := mcptest.NewInvoker(claude.New(agent.Options(), invoker.Options{InterruptGrace: 200 * time.Millisecond}))
			opts := &mcpadapter.Options{}
			if tc.warm {
				opts.WarmSessions.MaxSessions = 1
			}
			server, tools := newServer(t, opts, inv)
			c := mcptest.Connect(t, server, tools, nil)
			start := time.Now()
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, "claude", mcpadapter.Input{Prompt: "Explain.", Workdir: t.TempDir()})
				errc <- err
			}()
			req, err := inv.WaitStart(t.Context())
			if err != nil || req.Prompt != "Explain." {
				t.Fatalf("WaitStart() = %+v, %v; want the run's request", req, err)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("Call() error = %v, want context.Canceled", err)
			}
			if tc.warm {
				// A cancelled turn keeps its session, which Wait would wait
				// for until it is idle for IdleTimeout: Close ends it.
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := c.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if pids := invokertest.Survivors(); len(pids) > 0 {
				t.Errorf("processes alive once the run was reaped: %v", pids)
			}
			if d := time.Since(start); d >= mcpadapter.DefaultProgressInterval {
				t.Logf("the test took %v, as long as a progress interval (a slow machine?)", d)
			}
		})
	}
}

// TestWaitStartContext: WaitStart gives up when its context ends.
func TestWaitStartContext(t *testing.T) {
	inv := mcptest.NewInvoker(codex.New(invokertest.Agent{}.Options()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := inv.WaitStart(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitStart() error = %v, want context.Canceled", err)
	}
}

// brokenServer is a server with the tools of an invoker, and tools named
// after invokers that answer what no tool of mcpadapter answers.
func brokenServer(t *testing.T) (*mcp.Server, *mcpadapter.Tools) {
	server, tools := newServer(t, nil, codex.New(invokertest.Agent{}.Options()))
	add := func(name string, res func() *mcp.CallToolResult) {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res(), nil })
	}
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	add("plain", func() *mcp.CallToolResult { return &mcp.CallToolResult{Content: text("just text")} })
	add("extra", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text("{}"), StructuredContent: map[string]any{"status": "completed", "answer": "42"}}
	})
	add("status", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text("{}"), StructuredContent: map[string]any{"status": "done"}}
	})
	add("iserror", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text("{}"), IsError: true, StructuredContent: map[string]any{"status": "completed", "text": "fine"}}
	})
	add("noerror", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text("{}"), IsError: true, StructuredContent: map[string]any{"status": "failed"}}
	})
	add("counts", func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text("{}"), StructuredContent: map[string]any{
			"results": []any{map[string]any{"index": 1, "status": "completed"}}, "completed": 2}}
	})
	return server, tools
}

// TestBrokenServer: a result that no mcpadapter tool gives is an error
// naming what is wrong, as testing/fstest reports a broken file system.
func TestBrokenServer(t *testing.T) {
	server, tools := brokenServer(t)
	c := mcptest.Connect(t, server, tools, nil)
	for _, tc := range []struct {
		tool     string
		parallel bool
		want     []string
	}{
		{"plain", false, []string{`tool "plain"`, "no structured content", "just text"}},
		{"extra", false, []string{`tool "extra"`, "does not decode into mcpadapter.Output", `unknown field "answer"`}},
		{"status", false, []string{`status "done" is none of`}},
		{"iserror", false, []string{`isError is true for status "completed"`}},
		{"noerror", false, []string{`status "failed" without an error`}},
		{"counts", true, []string{"results[0] has index 1", "counts completed 2, failed 0, cancelled 0, but the results hold 1, 0 and 0"}},
	} {
		var err error
		if tc.parallel {
			_, err = c.CallParallel(t.Context(), tc.tool, map[string]any{})
		} else {
			_, err = c.Call(t.Context(), tc.tool, map[string]any{})
		}
		if err == nil {
			t.Errorf("%s: error = nil, want one", tc.tool)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error = %v, want it to say %s", tc.tool, err, w)
			}
		}
	}
}

// fakeTB records what Connect reports to its test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Error(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprint(args...))
}
func (f *fakeTB) Fatal(args ...any) {
	f.Error(args...)
	runtime.Goexit()
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// cleanup runs the cleanups, last registered first, as testing does.
func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestConnectTeardown: Connect's cleanup closes the client, then the
// server's session, then shuts the tools down, and reports nothing when
// all goes well, a call the client gave up included; Connect fails the
// test when it cannot connect.
func TestConnectTeardown(t *testing.T) {
	agent := invokertest.Agent{CLI: "claude", Stall: time.Hour}
	inv := mcptest.NewInvoker(claude.New(agent.Options()))
	server, tools := newServer(t, nil, inv)
	tb := &fakeTB{}
	c := mcptest.Connect(tb, server, tools, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "claude", mcpadapter.Input{Prompt: "Explain.", Workdir: t.TempDir()})
		errc <- err
	}()
	if _, err := inv.WaitStart(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-errc
	tb.cleanup() // at once: the server still answers the call it is stopping
	if len(tb.errs) > 0 {
		t.Errorf("Connect's cleanup reported %q, want nothing", tb.errs)
	}
	if out, err := c.Call(t.Context(), "claude", mcpadapter.Input{Prompt: "x", Workdir: t.TempDir()}); err == nil {
		t.Errorf("Call() after the cleanup = %+v, want an error: the client is closed", out)
	}
	if n := tools.Active(); n != 0 {
		t.Errorf("%d calls in progress after the cleanup, want 0", n)
	}

	tb = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mcptest.Connect(tb, server, nil, nil)
	}()
	<-done
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "*mcpadapter.Tools are required") {
		t.Errorf("Connect(nil tools) reported %q, want one fatal error", tb.errs)
	}
}

// TestCloseTwice: two clients of one server close one after the other;
// the second Close shuts down tools already shut down, and reports
// nothing.
func TestCloseTwice(t *testing.T) {
	server, tools := newServer(t, nil, codex.New(invokertest.Agent{}.Options()))
	a, err := mcptest.NewClient(server, tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcptest.NewClient(server, tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := b.Call(t.Context(), "codex", mcpadapter.Input{Prompt: "x", Workdir: os.TempDir()}); err != nil || out.Status != mcpadapter.StatusCompleted {
		t.Errorf("Call() = %+v, %v", out, err)
	}
	if err := errors.Join(b.Close(), a.Close()); err != nil {
		t.Errorf("Close() = %v, want nil for both clients", err)
	}
}
