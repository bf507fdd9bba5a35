package driver

import (
	"context"
	"errors"
	"testing"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestTelemetryNoopAllocs counts what the engine's telemetry allocates for
// one run when the host installed no OpenTelemetry SDK (otel's global
// providers): the calls a run makes, with a stop, a tool call and a
// sweep. The whole run allocates some hundreds of kilobytes (see
// BenchmarkTelemetryOverhead); this keeps the telemetry's share a few
// small values.
func TestTelemetryNoopAllocs(t *testing.T) {
	tel := newTelemetry(nil, nil)
	tel.bind("codex")
	sreq := &invoker.SessionRequest{Model: "m", Permission: invoker.ReadOnly}
	tool := &invoker.Event{Kind: invoker.KindToolCall, Tool: &invoker.Tool{Name: "Bash", ID: "1"}}
	msg := &invoker.Event{Kind: invoker.KindMessage, Text: "hi"}
	res := &invoker.Result{ExitCode: 0, Usage: invoker.Usage{InputTokens: 10, OutputTokens: 5}}
	stop := errors.New("stop")
	allocs := testing.AllocsPerRun(100, func() {
		_, sp := tel.begin(context.Background(), modeInvoke, "codex", sreq)
		sp.started(1, "cgroup")
		for range 10 {
			sp.saw(msg)
		}
		sp.saw(tool)
		sp.stopping(stop)
		sp.ladder(stepInterrupt)
		sp.swept(proc.Report{})
		sp.exited(proc.State{})
		_ = sp.environ()
		sp.end(res, nil, false)
	})
	t.Logf("telemetry of one run without an SDK: %.0f allocations", allocs)

	// The per-event path, after the first event, allocates nothing.
	_, sp := tel.begin(context.Background(), modeInvoke, "codex", sreq)
	sp.saw(msg)
	if n := testing.AllocsPerRun(1000, func() { sp.saw(msg); sp.saw(tool) }); n != 0 {
		t.Errorf("telemetry of an event without an SDK = %.1f allocations, want 0", n)
	}
	sp.end(res, nil, false)
	if allocs > 6 {
		t.Errorf("telemetry of one run without an SDK = %.0f allocations, want at most 6", allocs)
	}
}

// TestTelemetryModelBound: past maxModels distinct models, tokens are
// counted under "_OTHER", so that a client choosing models cannot grow the
// series without bound.
func TestTelemetryModelBound(t *testing.T) {
	tel := newTelemetry(nil, nil)
	tel.bind("codex")
	for i := range maxModels + 10 {
		tel.usage(string(rune('a'+i%26)) + string(rune('0'+i/26)))
	}
	if n := tel.models.Load(); n != maxModels {
		t.Errorf("models with series of their own = %d, want %d", n, maxModels)
	}
	if _, ok := tel.usageOpts.Load(otherModel); !ok {
		t.Errorf("no %s series after %d models", otherModel, maxModels+10)
	}
}
