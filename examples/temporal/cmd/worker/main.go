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
//
// Its turns run under the library's sandbox (docs/sandbox.md): -sandbox
// available (the default) has the kernel hold what each turn may touch
// where the host can (codex, whose own sandbox cannot nest, with its own
// sandbox off where the network part holds too, else without); required
// fails a turn where the host cannot hold it; off runs without. -network adds network rules: none, or the
// hosts the turns may reach besides their model endpoint and MCP servers.
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
	sandbox := flag.String("sandbox", agentflow.DefaultSandbox, "the filesystem sandbox of the turns (docs/sandbox.md): available (held by the kernel where the host can; codex with its own sandbox off where the network part holds too, below Unlimited with the network rules none unless -network says more (the command MCP servers it starts too), else without), required (every CLI; a turn fails where the host cannot hold it, a codex turn below Unlimited where the network part does not hold) or off")
	network := flag.String("network", "", "with -sandbox available or required: the turns' network rules: none (only the CLI's model endpoint and its MCP servers), or a comma-separated list of the hosts the turns may reach besides them (host, host:port, *.domain); empty (the default): no network rules")
	flag.Parse()
	sb, err := agentflow.SandboxOf(*sandbox, *network)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: -"+err.Error())
		os.Exit(2)
	}
	opts := invoker.Options{Sandbox: sb}

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
			"codex":  codex.New(opts),
			"gemini": gemini.New(opts),
			"claude": claude.New(opts),
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
