package driver_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// The sandboxed benchmarks below each have a baseline of their own, the
// same work without the sandbox under a name of its own, so that
// scripts/bench can run each sandboxed benchmark back to back with its
// baseline and scripts/benchreport can pair the two runs (a run of the
// target with the run of its baseline printed next to it) without
// mixing them with BenchmarkInvokeQuick and BenchmarkCancelCooperative,
// which are paired with the bare os/exec baselines.

// BenchmarkInvokeQuickSandboxed is BenchmarkInvokeQuick under a required
// filesystem sandbox at ReadOnly: the ruleset built and applied, the
// private TMPDIR made and removed. Its baseline is
// BenchmarkInvokeQuickPlain; the target is at most 1.10 times it.
func BenchmarkInvokeQuickSandboxed(b *testing.B) {
	benchQuick(b, invoker.Sandbox{Mode: "required"}, "filesystem")
}

// BenchmarkInvokeQuickSandboxedWrite is BenchmarkInvokeQuickSandboxed at
// WorkspaceWrite: where the run has its mount namespace, its start walks
// the working directory for the held names below its top, and its end,
// once the tree is gone, walks it again for those the run made. The
// working directory is an empty one, or the tree CLINVOKE_NESTED_TREE
// names (a copy of this checkout, say). Its baseline is
// BenchmarkInvokeQuickPlain.
func BenchmarkInvokeQuickSandboxedWrite(b *testing.B) {
	benchQuick(b, invoker.Sandbox{Mode: "required"}, "filesystem", func(req *invoker.Request) {
		req.Permission = invoker.WorkspaceWrite
		if dir := os.Getenv("CLINVOKE_NESTED_TREE"); dir != "" {
			req.Workdir = dir
		}
	})
}

// BenchmarkInvokeQuickSandboxedNetwork is BenchmarkInvokeQuickSandboxed
// with the network rules "none" too: the namespace made and entered, the
// proxy's listener opened, served and closed. Its baseline is
// BenchmarkInvokeQuickPlain.
func BenchmarkInvokeQuickSandboxedNetwork(b *testing.B) {
	requireSandboxNet(b)
	benchQuick(b, invoker.Sandbox{Mode: "required", Network: []string{"none"}}, "filesystem,network")
}

// BenchmarkInvokeQuickPlain is the baseline of the two benchmarks above:
// BenchmarkInvokeQuick's run, no sandbox.
func BenchmarkInvokeQuickPlain(b *testing.B) {
	benchQuick(b, invoker.Sandbox{}, "")
}

// benchQuick runs the quick fake of BenchmarkInvokeQuick under sb, each
// run's result reporting the sandbox want.
func benchQuick(b *testing.B, sb invoker.Sandbox, want string, set ...func(*invoker.Request)) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	req.Sandbox = sb
	for _, f := range set {
		f(&req)
	}
	inv := benchInvoker()
	for b.Loop() {
		res, err := inv.Invoke(context.Background(), req)
		if err != nil || res.Text != "quick" || res.Sandbox != want {
			b.Fatalf("Invoke() = %+v, %v; want the answer, sandbox %q", res, err, want)
		}
	}
	reportSurvivors(b, s.Tag)
}

// BenchmarkCancelCooperativeSandboxed is BenchmarkCancelCooperative under
// a required filesystem sandbox at ReadOnly. Its baseline is
// BenchmarkCancelCooperativePlain.
func BenchmarkCancelCooperativeSandboxed(b *testing.B) {
	benchCancel(b, fakeagent.Script{StallFor: time.Hour}, invoker.Sandbox{Mode: "required"})
}

// BenchmarkCancelCooperativePlain is the baseline of
// BenchmarkCancelCooperativeSandboxed: BenchmarkCancelCooperative's run,
// no sandbox.
func BenchmarkCancelCooperativePlain(b *testing.B) {
	benchCancel(b, fakeagent.Script{StallFor: time.Hour}, invoker.Sandbox{})
}
