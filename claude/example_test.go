package claude_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// This example asks Claude Code a question and resumes the session with
// permission to edit. It needs the claude CLI, so it has no checked output.
func Example() {
	inv := claude.New()
	ctx := context.Background()
	req := invoker.Request{
		Prompt:       "Find the function that parses the config file.",
		Workdir:      "/home/me/project",
		SystemPrompt: "Answer in one paragraph.",
		OnEvent: func(ev invoker.Event) {
			switch ev.Kind {
			case invoker.KindToolCall:
				fmt.Printf("-> %s %s\n", ev.Tool.Name, ev.Tool.Input)
			case invoker.KindWarning:
				fmt.Println("warning:", ev.Text)
			}
		},
	}
	res, err := inv.Invoke(ctx, req)
	var se *invoker.StreamError
	switch {
	case errors.Is(err, invoker.ErrAuthRequired):
		log.Fatal("log in with `claude` or set ANTHROPIC_API_KEY")
	case errors.As(err, &se) && se.Type == "error_max_turns":
		log.Fatal("the turn limit was reached")
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(res.Text, res.Usage.CostUSD)

	// Resume in the same Workdir: Claude Code stores sessions per directory.
	req.Prompt = "Add input validation to it."
	req.SessionID = res.SessionID
	req.Permission = invoker.WorkspaceWrite
	if _, err := inv.Invoke(ctx, req); err != nil {
		log.Fatal(err)
	}
}

// How the events of one turn arrive: Claude Code prints one text block
// per assistant event, and its result carries the whole final answer;
// every event carries the session id once it is known.
// A scripted stand-in for the CLI answers here (invokertest.Agent); in a
// program, claude.New() takes the place of claude.New(agent.Options()).
func Example_events() {
	inv := claude.New(invokertest.Agent{CLI: "claude", SessionID: "s-1", Tool: true, Answer: "It prints hello.", Chunks: 2}.Options())
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
	// s-1 tool_call Bash
	// s-1 tool_result Bash
	// s-1 message "It print"
	// s-1 message "s hello."
	// s-1 usage
	// s-1 done
	// answer "It prints hello."
}
