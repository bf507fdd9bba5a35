package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// This example streams Gemini's answer as it arrives. It needs the gemini
// CLI, so it has no checked output.
func Example() {
	inv := gemini.New()
	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "Which files define the HTTP handlers? Look at @internal/server.go first.",
		Workdir: "/home/me/project",
		Model:   "gemini-2.5-pro",
		Deltas:  true,
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindDelta && ev.Delta == invoker.KindMessage {
				fmt.Print(ev.Text) // the answer as it is written
			}
		},
	})
	var ee *invoker.ExitError
	switch {
	case errors.Is(err, invoker.ErrAuthRequired):
		log.Fatal("configure gemini authentication (GEMINI_API_KEY) first")
	case errors.As(err, &ee):
		log.Fatalf("gemini exited %d: %s", ee.ExitCode, ee.Explanation)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("\nsession:", res.SessionID)
}

// Gemini takes a system prompt only from a file; the backend reports the
// field as unsupported rather than writing temporary files.
func Example_systemPrompt() {
	_, err := gemini.New().Invoke(context.Background(), invoker.Request{
		Prompt:       "hi",
		Workdir:      os.TempDir(),
		SystemPrompt: "Answer in French.",
	})
	if errors.Is(err, invoker.ErrUnsupported) {
		// Write the prompt to a file and pass
		// Env: []string{"GEMINI_SYSTEM_MD=/path/system.md"} instead.
		fmt.Println(err)
	}
	// Output:
	// gemini: Request.SystemPrompt is not supported by this CLI: gemini reads a system prompt only from a file: write it and set GEMINI_SYSTEM_MD=/path/to/file.md in Request.Env (it replaces gemini's built-in prompt)
}

// How the events of one turn arrive: Gemini streams the answer as deltas
// (delivered with Request.Deltas), then the whole message, which is the
// final answer, and every event carries the session id once it is known.
// A scripted stand-in for the CLI answers here (invokertest.Agent); in a
// program, gemini.New() takes the place of gemini.New(agent.Options()).
func Example_events() {
	inv := gemini.New(invokertest.Agent{CLI: "gemini", SessionID: "s-1", Tool: true, Answer: "It prints hello.", Chunks: 2}.Options())
	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "What does `echo hello` print?",
		Workdir: os.TempDir(),
		Deltas:  true,
		OnEvent: func(ev invoker.Event) {
			switch {
			case ev.Tool != nil:
				fmt.Println(ev.SessionID, ev.Kind, ev.Tool.Name)
			case ev.Kind == invoker.KindDelta:
				fmt.Printf("%s %s of a %s %q\n", ev.SessionID, ev.Kind, ev.Delta, ev.Text)
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
	// s-1 tool_call run_shell_command
	// s-1 tool_result run_shell_command
	// s-1 delta of a message "It print"
	// s-1 delta of a message "s hello."
	// s-1 message "It prints hello."
	// s-1 usage
	// s-1 done
	// answer "It prints hello."
}
