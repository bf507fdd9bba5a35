package agentflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/clinvoke/clinvoke/claude"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// BenchmarkTurn measures what Temporal adds to a turn: the same fake-agent
// turn invoked directly, and through a FanOut workflow of one turn on the dev
// server and a worker in this process (start, schedule, heartbeats, result).
// The difference of the two is the overhead.
//
//	go test -run '^$' -bench Turn -benchtime 20x .
func BenchmarkTurn(b *testing.B) {
	addr, ns := devServer(b)
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	agent := invokertest.Agent{CLI: "claude", Answer: "benchmarked", Chunks: 3}
	inv := claude.New(agent.Options())
	queue := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	w := agentflow.NewWorker(c, queue, &agentflow.Activities{
		Invokers: map[string]invoker.Invoker{"claude": inv}, Worker: "bench",
	})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	dir := b.TempDir()
	ctx := context.Background()

	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			res, err := inv.Invoke(ctx, invoker.Request{Prompt: "p", Workdir: dir})
			if err != nil || res.Text != "benchmarked" {
				b.Fatal(err, res.Text)
			}
		}
	})
	b.Run("temporal", func(b *testing.B) {
		in := agentflow.FanOutInput{Turns: []agentflow.TurnInput{{CLI: "claude", Prompt: "p", Workdir: dir}}}
		for b.Loop() {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, agentflow.FanOutWorkflow, in)
			if err != nil {
				b.Fatal(err)
			}
			var out agentflow.FanOutOutput
			if err := run.Get(ctx, &out); err != nil || out.Results[0].State != agentflow.StateDone {
				b.Fatal(err, out)
			}
		}
	})
}
