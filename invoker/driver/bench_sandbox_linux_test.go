package driver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// BenchmarkInvokeQuickSandboxed is BenchmarkInvokeQuick under a required
// filesystem sandbox at ReadOnly: the ruleset built and applied, the
// private TMPDIR made and removed. The target is at most 1.10 times
// BenchmarkInvokeQuick.
func BenchmarkInvokeQuickSandboxed(b *testing.B) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	req.Sandbox = invoker.Sandbox{Mode: "required"}
	inv := benchInvoker()
	for b.Loop() {
		res, err := inv.Invoke(context.Background(), req)
		if err != nil || res.Text != "quick" || res.Sandbox != "filesystem" {
			b.Fatalf("Invoke() = %+v, %v; want the answer, sandboxed", res, err)
		}
	}
	reportSurvivors(b, s.Tag)
}

// BenchmarkCancelCooperativeSandboxed is BenchmarkCancelCooperative under
// a required filesystem sandbox at ReadOnly.
func BenchmarkCancelCooperativeSandboxed(b *testing.B) {
	s := fakeagent.Script{StallFor: time.Hour}
	req := benchRequest(b, &s)
	req.Sandbox = invoker.Sandbox{Mode: "required"}
	inv := benchInvoker()
	var samples []time.Duration
	for b.Loop() {
		d, err := cancelRun(inv, req)
		if !errors.Is(err, context.Canceled) {
			b.Fatalf("Invoke() error = %v, want context.Canceled", err)
		}
		samples = append(samples, d)
	}
	reportQuantiles(b, samples, "cancel-ms")
	reportSurvivors(b, s.Tag)
}
