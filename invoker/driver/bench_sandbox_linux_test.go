package driver_test

import (
	"context"
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
	benchCancel(b, fakeagent.Script{StallFor: time.Hour}, invoker.Sandbox{Mode: "required"})
}

// BenchmarkInvokeQuickSandboxedNetwork is BenchmarkInvokeQuickSandboxed
// with the network rules "none" too: the namespace made and entered, the
// proxy's listener opened, served and closed.
func BenchmarkInvokeQuickSandboxedNetwork(b *testing.B) {
	requireSandboxNet(b)
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	inv := benchInvoker()
	for b.Loop() {
		res, err := inv.Invoke(context.Background(), req)
		if err != nil || res.Text != "quick" || res.Sandbox != "filesystem,network" {
			b.Fatalf("Invoke() = %+v, %v; want the answer, sandboxed with the network rules", res, err)
		}
	}
	reportSurvivors(b, s.Tag)
}
