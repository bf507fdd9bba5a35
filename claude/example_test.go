package claude_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/invoker"
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
