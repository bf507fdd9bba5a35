// Command starter runs a FanOut workflow of agent turns and prints its
// results as JSON: one turn per prompt given as an argument (or per line of
// standard input), all with the same CLI and working directory.
//
//	go run ./cmd/starter -cli claude -C ~/src/project -concurrency 4 \
//		"Review internal/a" "Review internal/b"
//
// Ctrl-C cancels the workflow: every running turn's agent is stopped and its
// tree gone before the turn reports cancelled, with its session id and partial
// answer. -cancel N cancels only turn N of the workflow -workflow-id names.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.temporal.io/sdk/client"

	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/invoker"
)

func main() {
	address := flag.String("address", "127.0.0.1:7233", "Temporal frontend `host:port`")
	namespace := flag.String("namespace", "default", "Temporal `namespace`")
	queue := flag.String("task-queue", agentflow.TaskQueue, "task `queue` of the workers")
	cli := flag.String("cli", "claude", "agent `CLI`: codex, gemini or claude")
	workdir := flag.String("C", ".", "working `directory` of every turn")
	permission := flag.String("permission", "read-only", "read-only, workspace-write or unlimited")
	concurrency := flag.Int("concurrency", 4, "most turns at once")
	failFast := flag.Bool("fail-fast", false, "cancel the rest at the first turn that fails for good")
	id := flag.String("workflow-id", "", "workflow `id` (default: the server's)")
	cancelTurn := flag.Int("cancel", -1, "cancel turn `N` of -workflow-id and exit")
	flag.Parse()

	c, err := client.Dial(client.Options{HostPort: *address, Namespace: *namespace})
	if err != nil {
		fail(err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *cancelTurn >= 0 {
		if err := c.SignalWorkflow(ctx, *id, "", agentflow.CancelTurnSignal, *cancelTurn); err != nil {
			fail(err)
		}
		return
	}

	dir, err := filepath.Abs(*workdir)
	if err != nil {
		fail(err)
	}
	prompts := flag.Args()
	if len(prompts) == 0 {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() != "" {
				prompts = append(prompts, sc.Text())
			}
		}
	}
	in := agentflow.FanOutInput{Concurrency: *concurrency, FailFast: *failFast}
	for _, p := range prompts {
		in.Turns = append(in.Turns, agentflow.TurnInput{
			CLI: *cli, Prompt: p, Workdir: dir, Permission: invoker.Permission(*permission),
		})
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: *id, TaskQueue: *queue},
		agentflow.FanOutWorkflow, in)
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "workflow %s run %s: %d turns\n", run.GetID(), run.GetRunID(), len(in.Turns))

	done := make(chan error, 1)
	var out agentflow.FanOutOutput
	go func() { done <- run.Get(context.Background(), &out) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "cancelling the workflow: its running turns stop, their trees gone first")
		if err := c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()); err != nil {
			fail(err)
		}
		err = <-done
		// A cancelled workflow returns no result: ask the query instead.
		if v, qerr := c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), agentflow.StatusQuery); qerr == nil {
			_ = v.Get(&out.Results)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if encErr := enc.Encode(out); encErr != nil {
		fail(encErr)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "starter:", err)
	os.Exit(1)
}
