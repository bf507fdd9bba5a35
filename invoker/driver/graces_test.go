package driver_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// signalLog is a slog.Handler that keeps the signals the engine logs as it
// walks the ladder (its debug records "signal" with a "signal" attribute).
type signalLog struct {
	mu   sync.Mutex
	sent []string
}

func (*signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalLog) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *signalLog) WithGroup(string) slog.Handler          { return h }

func (h *signalLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "signal" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "signal" {
			h.mu.Lock()
			h.sent = append(h.sent, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *signalLog) signals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

// Options.StopGraces replaces the Invoker's graces for the runs stopped
// with the cause it chooses, and only for those.
func TestStopGraces(t *testing.T) {
	errShutdown := errors.New("server shutting down")
	choose := func(cause error) (time.Duration, time.Duration, bool) {
		if errors.Is(cause, errShutdown) {
			return 0, 0, true // straight to SIGKILL
		}
		if errors.Is(cause, context.DeadlineExceeded) {
			return 0, 50 * time.Millisecond, true // no SIGINT
		}
		return 0, 0, false
	}
	tests := []struct {
		name  string
		cause error
		want  []string
	}{
		{"chosen: no grace at all", errShutdown, []string{"SIGKILL"}},
		{"chosen: terminate only", context.DeadlineExceeded, []string{"SIGTERM", "SIGKILL"}},
		{"not chosen: the Invoker's ladder", errors.New("client cancelled"), []string{"SIGINT", "SIGTERM", "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &signalLog{}
			// The fake ignores SIGINT and SIGTERM, so every step of the
			// ladder that is walked is logged.
			f := newFixture(t, fakeagent.Script{StreamFor: time.Minute, IgnoreSignals: true},
				append(fastLadder, invoker.Options{Logger: slog.New(log), StopGraces: choose})...)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f.req.OnEvent = func(ev invoker.Event) {
				if ev.Kind == invoker.KindSession {
					cancel(tt.cause)
				}
			}
			_, err := f.inv.Invoke(ctx, f.req)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Invoke() error = %v, want context.Canceled", err)
			}
			if got := log.signals(); !slices.Equal(got, tt.want) {
				t.Errorf("signals sent = %q, want %q", got, tt.want)
			}
			f.assertReaped(1)
		})
	}
}
