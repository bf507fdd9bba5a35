package codex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
)

// This example runs one read-only turn and then resumes the thread with
// write access. It needs the codex CLI, so it has no checked output.
func Example() {
	inv := codex.New(invoker.WithIdleTimeout(5 * time.Minute))
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
