package codex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// This example runs one read-only turn and then resumes the thread with
// write access. It needs the codex CLI, so it has no checked output.
func Example() {
	inv := codex.New(invoker.Options{IdleTimeout: 5 * time.Minute})
	ctx := context.Background()

	res, err := inv.Invoke(ctx, invoker.Request{
		Prompt:  "Summarise what this repository does.",
		Workdir: "/home/me/project",
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindToolCall {
				fmt.Println("tool:", ev.Tool.Name)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)

	// Resume the same thread; the permission is restated on resume.
	res, err = inv.Invoke(ctx, invoker.Request{
		Prompt:     "Now add a README section with that summary.",
		Workdir:    "/home/me/project",
		SessionID:  res.SessionID,
		Permission: invoker.WorkspaceWrite,
	})
	var se *invoker.StreamError
	switch {
	case errors.Is(err, invoker.ErrAuthRequired):
		log.Fatal("run `codex login` first")
	case errors.As(err, &se):
		log.Fatalf("codex reported: %s", se.Message)
	case err != nil:
		log.Fatal(err)
	}
	// Codex reports usage cumulatively over the thread.
	fmt.Println(res.Text, res.Usage.InputTokens)
}

// How the events of one turn arrive: codex exec prints each agent message
// whole (here two, the last being the final answer), and every event
// carries the thread id once it is known. (Request.Deltas runs the turn on
// the app-server instead, which streams the text as it is written.)
// A scripted stand-in for the CLI answers here (invokertest.Agent); in a
// program, codex.New() takes the place of codex.New(agent.Options()).
func Example_events() {
	inv := codex.New(invokertest.Agent{CLI: "codex", SessionID: "s-1", Tool: true, Answer: "It prints hello.", Chunks: 2}.Options())
	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "What does `echo hello` print?",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) {
			switch {
			case ev.Tool != nil:
				fmt.Println(ev.SessionID, ev.Kind, ev.Tool.Name)
			case ev.Text != "":
				fmt.Printf("%s %s %q\n", ev.SessionID, ev.Kind, ev.Text)
			default:
				fmt.Println(ev.SessionID, ev.Kind)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("answer %q\n", res.Text)
	// Output:
	// s-1 session
	// s-1 tool_call command_execution
	// s-1 tool_result command_execution
	// s-1 message "It print"
	// s-1 message "It prints hello."
	// s-1 usage
	// s-1 done
	// answer "It prints hello."
}
