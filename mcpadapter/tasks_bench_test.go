package mcpadapter_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// benchTasks connects a client to a server of inv over the SDK's
// in-memory transports, through Tools.Transport.
func benchTasks(b *testing.B, inv invoker.Invoker) (*mcp.ClientSession, func()) {
	b.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-bench", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, nil, inv)
	if err != nil {
		b.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), tools.Transport(st), nil)
	if err != nil {
		b.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0.0.1"}, nil)
	for _, err := range []error{
		mcp.AddSendingCustomMethod[*taskCallParams, *createTaskRes](client, taskCallMethod),
		mcp.AddSendingCustomMethod[*taskIDArgs, *taskResultRes](client, "tasks/result"),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	cs, err := client.Connect(context.Background(), renaming{ct}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	return cs, func() {
		cs.Close()
		ss.Wait()
		tools.Shutdown(context.Background())
	}
}

// BenchmarkTaskCreate measures a task-augmented call's answer (the task),
// against BenchmarkTaskPlainCall, a plain call of an invoker that answers
// at once.
func BenchmarkTaskCreate(b *testing.B) {
	inv := newStepper("agent")
	cs, stop := benchTasks(b, inv)
	defer stop()
	args := taskArgs(b.TempDir(), "x")
	b.ResetTimer()
	for b.Loop() {
		if _, err := mcp.CallCustomMethod[*taskCallParams, *createTaskRes](context.Background(), cs, taskCallMethod,
			&taskCallParams{Name: "agent", Arguments: args, Task: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		<-inv.reached
		inv.release <- struct{}{}
		b.StartTimer()
	}
}

// BenchmarkTaskPlainCall is the baseline of BenchmarkTaskCreate.
func BenchmarkTaskPlainCall(b *testing.B) {
	inv := answer("agent")
	cs, stop := benchTasks(b, inv)
	defer stop()
	args := taskArgs(b.TempDir(), "x")
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent", Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFinishedTaskMemory measures the heap that 10,000 finished tasks
// hold (their records and results, kept for their TTL), each with an
// answer of 1 KiB, which a result holds twice (the structured output, and
// its JSON as text content).
func BenchmarkFinishedTaskMemory(b *testing.B) {
	const n = 10000
	text := strings.Repeat("a", 1024)
	inv := quick{res: &invoker.Result{SessionID: "sess", Text: text, Usage: invoker.Usage{InputTokens: 10, OutputTokens: 5}}}
	for b.Loop() {
		cs, stop := benchTasks(b, inv)
		args := taskArgs(b.TempDir(), "x")
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			res, err := mcp.CallCustomMethod[*taskCallParams, *createTaskRes](context.Background(), cs, taskCallMethod,
				&taskCallParams{Name: "agent", Arguments: args, Task: map[string]any{}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := mcp.CallCustomMethod[*taskIDArgs, *taskResultRes](context.Background(), cs, "tasks/result", &taskIDArgs{TaskID: res.Task.TaskID}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/task")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB/10k")
		stop()
	}
}

// quick is an invoker that answers res at once and keeps nothing of its
// requests (a stub records them all).
type quick struct {
	invokeOnly
	res *invoker.Result
}

func (quick) Name() string { return "agent" }

func (q quick) Invoke(context.Context, invoker.Request) (*invoker.Result, error) {
	r := *q.res
	return &r, nil
}
