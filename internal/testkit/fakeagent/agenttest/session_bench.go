package agenttest

import (
	"context"
	"errors"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// BenchSessions benchmarks the backend that newInvoker returns, with the
// fake agent of flavor, as two sub-benchmarks under the flavor's name
// (BenchmarkSession/codex/TurnVsInvoke, as scripts/benchreport reads
// them): TurnVsInvoke, a warm turn of one session against a cold Invoke of
// the same prompt (time to the first event and to the result, and their
// warm ÷ cold ratios), and Interrupt, the time from a turn's cancel to
// Turn's return against the same cancel of a cold Invoke. Each also
// reports the processes of the fake left after the session was closed
// (survivors). The backend's TestMain must hand over to the fake (see the
// package documentation).
func BenchSessions(b *testing.B, flavor string, newInvoker func(...invoker.Options) invoker.Invoker) {
	b.Run(flavor, func(b *testing.B) {
		b.Run("TurnVsInvoke", func(b *testing.B) { benchTurnVsInvoke(b, flavor, newInvoker) })
		b.Run("Interrupt", func(b *testing.B) { benchInterrupt(b, flavor, newInvoker) })
	})
}

// benchRig is a fake agent both as a one-shot CLI (Invoke) and as a
// session, with the same script, so that a warm turn and a cold Invoke of
// the same prompt can run back to back.
type benchRig struct {
	inv invoker.Invoker
	req invoker.Request
	s   invoker.Session
	tag string
}

func newBenchRig(b *testing.B, flavor string, newInvoker func(...invoker.Options) invoker.Invoker, script fakeagent.Script) *benchRig {
	b.Helper()
	script.Flavor = flavor
	script.Tag = fakeagent.NewTag()
	inv := newInvoker(invoker.Options{Binary: os.Args[0], InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond})
	req := invoker.Request{Workdir: b.TempDir(), Env: script.Env()}
	// Deltas where the CLI streams them, as the text the interrupt
	// benchmark waits for: a stalled answer shows only as deltas. Not for
	// Codex's cold runs, whose exec mode prints whole messages and whose
	// Deltas would run them on the app-server instead.
	caps := inv.Capabilities()
	sreq := req.Session()
	sreq.Deltas = caps.Deltas
	req.Deltas = caps.Deltas && flavor != fakeagent.Codex
	s, err := inv.OpenSession(context.Background(), sreq)
	if err != nil {
		b.Fatalf("OpenSession() error = %v", err)
	}
	g := &benchRig{inv: inv, req: req, s: s, tag: script.Tag}
	b.Cleanup(func() { g.close(b) })
	return g
}

// close closes the session and returns how many processes of the fake
// (the session's and every cold Invoke's) are left, failing b if any is.
func (g *benchRig) close(b *testing.B) int {
	g.s.Close()
	left := fakeagent.Survivors(g.tag)
	if len(left) > 0 {
		b.Errorf("processes survived the benchmark: %v", left)
	}
	return len(left)
}

// timing is when a turn's first event came and when it returned, after its
// start.
type timing struct{ first, result time.Duration }

func (g *benchRig) cold(ctx context.Context, prompt string, onEvent func(invoker.Event)) (timing, error) {
	var t timing
	start := time.Now()
	req := g.req
	req.Prompt = prompt
	req.OnEvent = func(ev invoker.Event) {
		if t.first == 0 {
			t.first = time.Since(start)
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	_, err := g.inv.Invoke(ctx, req)
	t.result = time.Since(start)
	return t, err
}

func (g *benchRig) warm(ctx context.Context, prompt string, onEvent func(invoker.Event)) (timing, error) {
	var t timing
	start := time.Now()
	_, err := g.s.Turn(ctx, invoker.TurnRequest{Prompt: prompt, OnEvent: func(ev invoker.Event) {
		if t.first == 0 {
			t.first = time.Since(start)
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}})
	t.result = time.Since(start)
	return t, err
}

func medianMs(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// benchTurnVsInvoke runs the same prompt as a warm turn of one
// session and as a cold Invoke, back to back (alternating which goes
// first), and reports the medians and the warm ÷ cold ratios of the time to
// the first event and to the result. The fake answers at once, in one
// message: both times are the CLI's start-up (for the cold Invoke) and
// the library's work, with no model time, which both would pay alike. The
// fake agent starts in a few milliseconds; the real CLIs take 1–4 s
// (docs/session-protocols.md), so the ratios with them are far lower.
func benchTurnVsInvoke(b *testing.B, flavor string, newInvoker func(...invoker.Options) invoker.Invoker) {
	g := newBenchRig(b, flavor, newInvoker, fakeagent.Script{Chunks: 1})
	// A first turn, so that every measured turn is warm.
	if _, err := g.s.Turn(context.Background(), invoker.TurnRequest{Prompt: "warm up"}); err != nil {
		b.Fatalf("first Turn() error = %v", err)
	}
	ctx := context.Background()
	var coldFirst, coldResult, warmFirst, warmResult []time.Duration
	var ratioFirst, ratioResult []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var c, w timing
		var err error
		run := []func(){
			func() { c, err = g.cold(ctx, "say hi", nil) },
			func() { w, err = g.warm(ctx, "say hi", nil) },
		}
		if i%2 == 1 {
			run[0], run[1] = run[1], run[0]
		}
		for _, f := range run {
			if f(); err != nil {
				b.Fatal(err)
			}
		}
		coldFirst, coldResult = append(coldFirst, c.first), append(coldResult, c.result)
		warmFirst, warmResult = append(warmFirst, w.first), append(warmResult, w.result)
		ratioFirst = append(ratioFirst, float64(w.first)/float64(c.first))
		ratioResult = append(ratioResult, float64(w.result)/float64(c.result))
	}
	b.StopTimer()
	b.ReportMetric(medianMs(coldFirst), "cold-first-ms")
	b.ReportMetric(medianMs(coldResult), "cold-result-ms")
	b.ReportMetric(medianMs(warmFirst), "warm-first-ms")
	b.ReportMetric(medianMs(warmResult), "warm-result-ms")
	b.ReportMetric(medianRatio(ratioFirst), "warm/cold-first")
	b.ReportMetric(medianRatio(ratioResult), "warm/cold-result")
	b.ReportMetric(float64(g.close(b)), "survivors")
}

// benchInterrupt measures, from the cancel of a turn that is
// streaming to the return of Turn, the in-protocol interrupt of a warm
// session (the session lives on), against the signal ladder's first step
// on a cold Invoke of the same script (SIGINT; the fake ends as the real
// CLI of its flavour does on SIGINT; Invoke returns once the tree is
// gone), back to back, alternating which goes first. Both must end with
// the context's error, and the session must stay open.
func benchInterrupt(b *testing.B, flavor string, newInvoker func(...invoker.Options) invoker.Invoker) {
	g := newBenchRig(b, flavor, newInvoker, fakeagent.Script{Chunks: 2, StallFor: time.Hour})
	ctx := context.Background()
	var warm, cold []time.Duration
	var ratio []float64
	measure := func(what string, f func(context.Context, string, func(invoker.Event)) (timing, error)) time.Duration {
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var at time.Time
		_, err := f(tctx, fakeagent.PromptStall, func(ev invoker.Event) {
			if writing(ev) && at.IsZero() {
				at = time.Now()
				cancel()
			}
		})
		took := time.Since(at)
		switch {
		case at.IsZero():
			b.Fatalf("%s ended without streaming: %v", what, err)
		case !errors.Is(err, context.Canceled) || errors.Is(err, invoker.ErrSessionClosed):
			b.Fatalf("cancelled %s error = %v, want one matching context.Canceled only", what, err)
		}
		return took
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var w, c time.Duration
		run := []func(){
			func() {
				w = measure("Turn", func(c context.Context, p string, on func(invoker.Event)) (timing, error) { return g.warm(c, p, on) })
			},
			func() {
				c = measure("Invoke", func(c context.Context, p string, on func(invoker.Event)) (timing, error) { return g.cold(c, p, on) })
			},
		}
		if i%2 == 1 {
			run[0], run[1] = run[1], run[0]
		}
		for _, f := range run {
			f()
		}
		select {
		case <-g.s.Done():
			b.Fatalf("the session ended after an interrupt: %v", g.s.Err())
		default:
		}
		warm, cold = append(warm, w), append(cold, c)
		ratio = append(ratio, float64(w)/float64(c))
	}
	b.StopTimer()
	b.ReportMetric(medianMs(warm), "interrupt-ms")
	b.ReportMetric(medianMs(cold), "invoke-cancel-ms")
	b.ReportMetric(medianRatio(ratio), "interrupt/invoke-cancel")
	b.ReportMetric(float64(g.close(b)), "survivors")
}

func medianRatio(r []float64) float64 {
	if len(r) == 0 {
		return 0
	}
	s := append([]float64(nil), r...)
	sort.Float64s(s)
	return s[len(s)/2]
}
