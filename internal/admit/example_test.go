package admit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/internal/admit"
)

// A host budget of 1 GiB: a run that would take it over waits for room,
// told where it stands, and is admitted when a run ends.
func Example() {
	ctx := context.Background()
	q := admit.New(admit.Amounts{Memory: 1 << 30})

	first, err := q.Acquire(ctx, admit.Request{Need: admit.Amounts{Runs: 1, Memory: 768 << 20}})
	if err != nil {
		panic(err)
	}
	queued, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		g, err := q.Acquire(ctx, admit.Request{
			Need: admit.Amounts{Runs: 1, Memory: 512 << 20},
			OnWait: func(w admit.Wait) {
				fmt.Printf("queued, %d ahead\n", w.Ahead)
				if w.Ahead == 0 {
					close(queued)
				}
			},
		})
		if err != nil {
			panic(err)
		}
		defer g.Release() // when the run has ended
		fmt.Println("admitted after waiting:", g.Waited() > 0)
	}()
	<-queued
	first.Release() // the first run has ended
	<-done
	// Output:
	// queued, 0 ahead
	// admitted after waiting: true
}

// A run of codex failed: the model provider's rate limit was reached, and
// resets in an hour. The next run of codex waits for it, and its caller
// gives up.
func ExampleQueue_CloseGate() {
	q := admit.New(admit.Amounts{Runs: 8})
	q.CloseGate("codex", time.Now().Add(time.Hour))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := q.Acquire(ctx, admit.Request{
		Need: admit.Amounts{Runs: 1},
		Gate: "codex",
		OnWait: func(w admit.Wait) {
			fmt.Printf("waiting for the rate limit of %s to reset, in about %v\n", w.Gate, time.Until(w.Until).Round(time.Hour))
			cancel() // OnWait runs on the goroutine that called Acquire
		},
	})
	var we *admit.WaitError
	fmt.Println(errors.As(err, &we), we.Gate, errors.Is(err, context.Canceled))

	// A run of another backend does not wait.
	g, err := q.Acquire(context.Background(), admit.Request{Need: admit.Amounts{Runs: 1}, Gate: "claude"})
	fmt.Println(g.Waited(), err)
	g.Release()
	// Output:
	// waiting for the rate limit of codex to reset, in about 1h0m0s
	// true codex true
	// 0s <nil>
}
