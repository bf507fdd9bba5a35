// Command worker runs agent turns for Temporal: it polls the task queue for
// the FanOut workflow and the RunTurn activity, and runs each turn with the
// clinvoke backend it names (codex, gemini or claude, found on PATH).
//
//	go run ./cmd/worker -address 127.0.0.1:7233 -identity worker-1
//
// SIGINT or SIGTERM stops it: running turns get 5 s to finish, then are
// stopped (their trees gone before it exits) and fail with a retryable
// WorkerStopped error, so that another worker resumes them. A worker killed outright
// takes its agents' trees with it (cgroup containment's keeper), and the
// server retries its turns on another worker once their heartbeats time out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
)

func main() {
	address := flag.String("address", "127.0.0.1:7233", "Temporal frontend `host:port`")
	namespace := flag.String("namespace", "default", "Temporal `namespace`")
	queue := flag.String("task-queue", agentflow.TaskQueue, "task `queue` to poll")
	host, _ := os.Hostname()
	identity := flag.String("identity", fmt.Sprintf("%d@%s", os.Getpid(), host), "worker `name` in heartbeats and results")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := client.Dial(client.Options{HostPort: *address, Namespace: *namespace, Identity: *identity,
		Logger: log.NewStructuredLogger(logger)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	defer c.Close()

	a := &agentflow.Activities{
		Invokers: map[string]invoker.Invoker{
			"codex":  codex.New(),
			"gemini": gemini.New(),
			"claude": claude.New(),
		},
		Worker: *identity,
	}
	w := agentflow.NewWorker(c, *queue, a)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(interruptOn(ctx)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// interruptOn adapts ctx to worker.Run's interrupt channel.
func interruptOn(ctx context.Context) <-chan any {
	ch := make(chan any)
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}
