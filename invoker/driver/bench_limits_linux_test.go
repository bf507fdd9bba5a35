package driver_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// BenchmarkLimits measures what limits, accounting and admission add to a
// quick run, each against its baseline in the same iteration (run back to
// back, alternating which goes first), and reports the medians of the
// per-iteration ratios:
//
//   - limits-x: a run with memory, process and CPU limits ÷ the same run
//     without (both accounted, as every run is);
//   - account-x: an accounted run ÷ one not accounted (no limits);
//   - admit-x: a run admitted to a Budget with room ÷ one without a Budget;
//
// and fds-per-run, the descriptors the host holds per run in flight (50
// runs at once, each between its first event and its end). Limits the
// host cannot enforce are left out of the first pair (its ratio then
// measures nothing, and is reported as 0).
func BenchmarkLimits(b *testing.B) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	plain := benchInvoker()
	l := invoker.Limits{Memory: 1 << 30, Processes: 4096, CPU: 2}
	have := strings.Fields(plain.Capabilities().Limits)
	limited := benchInvoker(invoker.Options{Limits: enforceable(l, have)})
	budgeted := benchInvoker(invoker.Options{Budget: &invoker.Budget{Runs: 1 << 20}})
	unaccounted := driver.WithoutAccounting(plain)
	pairs := []struct {
		unit         string
		target, base invoker.Invoker
	}{
		{"limits-x", limited, plain},
		{"account-x", plain, unaccounted},
		{"admit-x", budgeted, plain},
	}
	ratios := make([][]float64, len(pairs))
	run := func(inv invoker.Invoker) time.Duration {
		start := time.Now()
		res, err := inv.Invoke(context.Background(), req)
		if err != nil || res.Text != "quick" {
			b.Fatalf("Invoke() = %+v, %v; want the answer", res, err)
		}
		return time.Since(start)
	}
	i := 0
	for b.Loop() {
		for k, p := range pairs {
			var t, base time.Duration
			if i%2 == 0 {
				t, base = run(p.target), run(p.base)
			} else {
				base, t = run(p.base), run(p.target)
			}
			ratios[k] = append(ratios[k], float64(t)/float64(base))
		}
		i++
	}
	for k, p := range pairs {
		if p.unit == "limits-x" && len(have) == 0 {
			b.ReportMetric(0, p.unit)
			continue
		}
		b.ReportMetric(median(ratios[k]), p.unit)
	}
	b.ReportMetric(fdsPerRun(b, plain, 50), "fds-per-run")
	reportSurvivors(b, s.Tag)
}

// enforceable returns l with only the fields have lists.
func enforceable(l invoker.Limits, have []string) invoker.Limits {
	var out invoker.Limits
	if slices.Contains(have, "Memory") {
		out.Memory = l.Memory
	}
	if slices.Contains(have, "Processes") {
		out.Processes = l.Processes
	}
	if slices.Contains(have, "CPU") {
		out.CPU = l.CPU
	}
	return out
}

// fdsPerRun starts n runs of inv that stall after their answer, counts the
// host's descriptors once all have printed it, and returns the descriptors
// each holds: (open then - open before) / n.
func fdsPerRun(b *testing.B, inv invoker.Invoker, n int) float64 {
	s := fakeagent.Script{Answer: "held", StallFor: time.Minute}
	req := benchRequest(b, &s)
	before := openFDs(b)
	ctx, cancel := context.WithCancel(context.Background())
	var answered, done sync.WaitGroup
	answered.Add(n)
	for range n {
		done.Go(func() {
			var once sync.Once
			r := req
			r.OnEvent = func(ev invoker.Event) {
				if ev.Kind == invoker.KindMessage {
					once.Do(answered.Done)
				}
			}
			inv.Invoke(ctx, r)
			once.Do(answered.Done)
		})
	}
	answered.Wait()
	during := openFDs(b)
	cancel()
	done.Wait()
	reportSurvivors(b, s.Tag)
	return float64(during-before) / float64(n)
}

// openFDs counts the descriptors this process holds.
func openFDs(b *testing.B) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(ents)
}
