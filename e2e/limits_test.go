//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// The limits of a session, on each real CLI: a shell tool that allocates
// past the session's memory limit is killed by the kernel, the CLI lives
// on and reports the failed tool, the next turn answers, and each turn's
// Result says what it used. docs/limits.md records what each CLI did.

// requireLimit fails (in CI, as root) or skips the test where inv cannot
// hold a limit on field.
func requireLimit(t *testing.T, inv invoker.Invoker, field string) {
	t.Helper()
	c := inv.Capabilities()
	if slices.Contains(strings.Fields(c.Limits), field) {
		return
	}
	if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
		t.Fatalf("Capabilities.Limits = %q, want %s: CI runs as root, where limits must work (%s)", c.Limits, field, c.LimitsNote)
	}
	t.Skipf("no %s limit on this host: %s", field, c.LimitsNote)
}

// sessionMemory is the memory limit of the sessions below: room for each
// CLI (Node.js CLIs hold 150 to 400 MiB) and for a tool larger than it, so
// that the kernel's OOM killer takes the tool, the largest process.
const sessionMemory = 1536 << 20

// memoryHog buffers 4 GiB in tail: on every machine, with no interpreter.
const memoryHog = "head -c 4G /dev/zero | tail -c 4G > /dev/null"

func TestLimitsSessionToolOverMemory(t *testing.T) {
	forEachSessionRig(t, clis, func(t *testing.T, r *rig) {
		requireLimit(t, r.inv, "Memory")
		// Unlimited: Claude Code's default mode asks before a pipeline,
		// and the limit, not a sandbox, is what is tested.
		sreq := invoker.Request{Workdir: r.workdir, Model: r.cli.model, Permission: invoker.Unlimited}.Session()
		sreq.Limits = invoker.Limits{Memory: sessionMemory}
		s := r.openSession(t, r.inv, sreq)
		r.srv.Enqueue(fakemodel.Shell(memoryHog), fakemodel.EchoToolResult("the tool said: "), fakemodel.Answer("still here"))

		var mu sync.Mutex
		var warnings, results []string
		onEvent := func(ev invoker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case invoker.KindWarning:
				warnings = append(warnings, ev.Text)
			case invoker.KindToolResult:
				if ev.Tool != nil {
					results = append(results, fmt.Sprintf("%s %q", ev.Tool.Status, snippet(ev.Tool.Output)))
				}
			}
		}
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "allocate a lot", OnEvent: onEvent})
		if err != nil {
			t.Fatalf("the turn of the hog: %v, want the CLI alive to answer; stderr:\n%s", err, res.Stderr)
		}
		mu.Lock()
		t.Logf("%s: tool results %v; warnings %q; answer %q; resources %+v", r.cli.name, results, warnings, snippet(res.Text), res.Resources)
		warned := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "memory limit of 1.5 GiB") })
		mu.Unlock()
		if !warned {
			t.Errorf("no KindWarning naming the memory limit; warnings: %q", warnings)
		}
		if !strings.HasPrefix(res.Text, "the tool said: ") {
			t.Errorf("answer %q, want the model's answer after the tool's result", res.Text)
		}
		if u := res.Resources; u.OOMKills < 1 || u.PeakMemory < sessionMemory*3/4 || u.PeakMemory > sessionMemory+1<<20 || u.Sampled {
			t.Errorf("Resources = %+v, want an OOM kill and a peak near the limit, counted by the kernel", u)
		}
		next, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "and now"})
		if err != nil || next.Text != "still here" {
			t.Fatalf("the next turn: %v, %q; want the CLI to answer", err, next.Text)
		}
		t.Logf("%s: the next turn used %+v", r.cli.name, next.Resources)
		if next.Resources.OOMKills != 0 || next.Resources.CPUTime <= 0 {
			t.Errorf("the next turn's Resources = %+v, want its own CPU time and no OOM kill", next.Resources)
		}
	})
}

// snippet shortens s for a log line.
func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
