package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
)

// This example streams Gemini's answer as it arrives. It needs the gemini
// CLI, so it has no checked output.
func Example() {
	inv := gemini.New()
	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "Which files define the HTTP handlers? Look at @internal/server.go first.",
		Workdir: "/home/me/project",
		Model:   "gemini-2.5-pro",
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				fmt.Print(ev.Text) // deltas
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
		Workdir:      "/home/me/project",
		SystemPrompt: "Answer in French.",
	})
	if errors.Is(err, invoker.ErrUnsupported) {
		// Write the prompt to a file and pass
		// Env: []string{"GEMINI_SYSTEM_MD=/path/system.md"} instead.
		fmt.Println(err)
	}
}
