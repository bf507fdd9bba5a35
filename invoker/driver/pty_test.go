//go:build linux || darwin

package driver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// In PTY mode the output stays byte-exact JSONL (no "\r\n", no echo), and
// cancellation starts with Ctrl-C written to the terminal.
func TestPTY(t *testing.T) {
	t.Run("completes", func(t *testing.T) {
		f := newFixture(t, fakeagent.Script{SessionID: "pty-1", Answer: "over a terminal", Tool: true}, invoker.Options{PTY: true})
		var warnings int
		f.req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning {
				warnings++
			}
		}
		res, err := f.inv.Invoke(context.Background(), f.req)
		if err != nil {
			t.Fatalf("Invoke() error = %v, want nil", err)
		}
		if res.SessionID != "pty-1" || res.Text != "over a terminal" {
			t.Errorf("Invoke() = {%q %q}, want {pty-1, over a terminal}", res.SessionID, res.Text)
		}
		if warnings > 0 {
			t.Errorf("%d undecodable lines: the terminal altered the output", warnings)
		}
		f.assertReaped(1)
	})
	t.Run("Ctrl-C cancels", func(t *testing.T) {
		// Long grace periods: if Ctrl-C did not reach the CLI, SIGTERM
		// would end it only after a second, with exit status 143.
		f := newFixture(t, fakeagent.Script{Chunks: 2, StallFor: time.Minute, Grandchild: true}, invoker.Options{PTY: true, InterruptGrace: time.Minute, TerminateGrace: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				cancel()
			}
		}
		res, err := f.inv.Invoke(ctx, f.req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke() error = %v, want context.Canceled", err)
		}
		if res.ExitCode != 1 {
			t.Errorf("Result.ExitCode = %d, want 1 (how Codex exits on SIGINT): Ctrl-C did not reach the CLI", res.ExitCode)
		}
		f.assertReaped(2)
	})
}
