package invokertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// An Agent stands in for a CLI: the real backend runs it as it runs the
// CLI. (This package's TestMain hands the test binary over to it, as
// invokertest.Main does.)
func ExampleAgent() {
	agent := invokertest.Agent{CLI: "codex", SessionID: "thread-1", Tool: true, Answer: "It prints hello."}
	res, err := codex.New(agent.Options()).Invoke(context.Background(), invoker.Request{
		Prompt:  "What does `echo hello` print?",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) { fmt.Println(ev.Kind) },
	})
	fmt.Println(res.Text, res.SessionID, err)
	// Output:
	// session
	// tool_call
	// tool_result
	// message
	// usage
	// done
	// It prints hello. thread-1 <nil>
}

// An Agent misbehaves on demand: here its model stalls after half an
// answer, and a cancel stops it; the partial answer survives, and the
// agent and the processes it left behind are gone when Invoke returns.
func ExampleAgent_stall() {
	agent := invokertest.Agent{CLI: "claude", Answer: "Half an", Stall: time.Hour, LeaveBehind: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := claude.New(agent.Options()).Invoke(ctx, invoker.Request{
		Prompt:  "Explain.",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				cancel() // half an answer is enough
			}
		},
	})
	fmt.Printf("%q %v\n", res.Text, errors.Is(err, context.Canceled))
	fmt.Println("survivors:", len(invokertest.Survivors()))
	// Output:
	// "Half an" true
	// survivors: 0
}
