//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// BenchmarkSessionTurnVsInvoke measures, for each real CLI with sessions,
// a warm turn of one session against a cold Invoke of the same prompt
// (CLI start-up included), back to back, alternating which goes first:
// the medians of the time to the first event and to the result, and the
// medians of the warm ÷ cold ratios. Run it with a fixed count, as the
// session's conversation grows with every turn:
//
//	e2e/run -run '^$' -bench SessionTurnVsInvoke -benchtime 5x
func BenchmarkSessionTurnVsInvoke(b *testing.B) {
	forEachSessionBench(b, func(b *testing.B, srv *fakemodel.Server, inv invoker.Invoker, req invoker.Request, s invoker.Session) {
		var cf, cr, wf, wr []time.Duration
		var rf, rr []float64
		for i := 0; i < b.N; i++ {
			srv.Enqueue(fakemodel.Answer("hi there"), fakemodel.Answer("hi there"))
			var c, w [2]time.Duration
			steps := []func(){
				func() { c = timeTurn(b, func(on func(invoker.Event)) error { return invokeWith(inv, req, on) }) },
				func() {
					w = timeTurn(b, func(on func(invoker.Event)) error {
						_, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "say hi", OnEvent: on})
						return err
					})
				},
			}
			if i%2 == 1 {
				steps[0], steps[1] = steps[1], steps[0]
			}
			for _, f := range steps {
				f()
			}
			cf, cr, wf, wr = append(cf, c[0]), append(cr, c[1]), append(wf, w[0]), append(wr, w[1])
			rf, rr = append(rf, float64(w[0])/float64(c[0])), append(rr, float64(w[1])/float64(c[1]))
		}
		b.ReportMetric(medMs(cf), "cold-first-ms")
		b.ReportMetric(medMs(cr), "cold-result-ms")
		b.ReportMetric(medMs(wf), "warm-first-ms")
		b.ReportMetric(medMs(wr), "warm-result-ms")
		b.ReportMetric(med(rf), "warm/cold-first")
		b.ReportMetric(med(rr), "warm/cold-result")
		// What a warm session holds between turns: its CLI's tree, idle
		// after b.N+1 turns (every cold Invoke's tree is gone by now).
		b.ReportMetric(treeRSSMiB(b, s), "warm-rss-MiB")
	})
}

// treeRSSMiB sums the resident memory (VmRSS) of the processes carrying the
// session's tag, which are then the session's CLI and what it started, in
// MiB. Pages shared between them count once per process, as ps shows them.
func treeRSSMiB(b *testing.B, s invoker.Session) float64 {
	select {
	case <-s.Done():
		b.Fatalf("the session ended: %v", s.Err())
	default:
	}
	var kib float64
	for _, p := range (&rig{tag: benchTag(b)}).survivors() {
		pid := strings.Fields(p)[0]
		status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
		if err != nil {
			continue // gone meanwhile
		}
		for l := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				kib += n
			}
		}
	}
	if kib == 0 {
		b.Fatal("no process of the session found to measure")
	}
	return kib / 1024
}

// benchTag is the tag of the CLIs of the benchmark b, a sub-benchmark of
// forEachSessionBench named after its CLI.
func benchTag(b *testing.B) string {
	name := b.Name()
	return fmt.Sprintf("%d-bench-%s", os.Getpid(), name[strings.LastIndex(name, "/")+1:])
}

// BenchmarkSessionInterrupt measures, for each real CLI with sessions, the
// time from the cancel of a turn whose model stalls mid-answer to the
// return of Turn (the CLI's own interrupt; the session lives on), against
// the same cancel of a cold Invoke (the signal ladder, until the tree is
// gone), back to back.
//
//	e2e/run -run '^$' -bench SessionInterrupt -benchtime 5x
func BenchmarkSessionInterrupt(b *testing.B) {
	forEachSessionBench(b, func(b *testing.B, srv *fakemodel.Server, inv invoker.Invoker, req invoker.Request, s invoker.Session) {
		var warm, cold []time.Duration
		var ratio []float64
		for i := 0; i < b.N; i++ {
			var w, c time.Duration
			steps := []func(){
				func() {
					w = cancelAfterModelCall(b, srv, func(ctx context.Context) error {
						_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "stall"})
						return err
					})
				},
				func() {
					c = cancelAfterModelCall(b, srv, func(ctx context.Context) error {
						r := req
						r.Prompt = "stall"
						_, err := inv.Invoke(ctx, r)
						return err
					})
				},
			}
			if i%2 == 1 {
				steps[0], steps[1] = steps[1], steps[0]
			}
			for _, f := range steps {
				f()
			}
			select {
			case <-s.Done():
				b.Fatalf("the session ended after an interrupt: %v", s.Err())
			default:
			}
			warm, cold = append(warm, w), append(cold, c)
			ratio = append(ratio, float64(w)/float64(c))
		}
		b.ReportMetric(medMs(warm), "interrupt-ms")
		b.ReportMetric(medMs(cold), "invoke-cancel-ms")
		b.ReportMetric(med(ratio), "interrupt/invoke-cancel")
	})
}

// forEachSessionBench runs f per CLI with sessions, each with a fake model
// server, an isolated home, an Invoker and an open session.
func forEachSessionBench(b *testing.B, f func(*testing.B, *fakemodel.Server, invoker.Invoker, invoker.Request, invoker.Session)) {
	for i := range clis {
		c := &clis[i]
		b.Run(c.name, func(b *testing.B) {
			bin, err := exec.LookPath(c.name)
			if err != nil {
				if os.Getenv("CI") == "true" {
					b.Fatalf("%s not on PATH: run e2e/run", c.name)
				}
				b.Skipf("%s not on PATH: run e2e/run", c.name)
			}
			srv := fakemodel.New(b)
			home := b.TempDir()
			tag := benchTag(b)
			env := append(c.setup(b, srv, home), "HOME="+home, tagVar+"="+tag)
			inv := c.new(invoker.Options{Binary: bin, Env: env})
			if caps := inv.Capabilities(); !caps.Sessions {
				b.Skipf("%s declares no sessions", c.name)
			}
			req := invoker.Request{Workdir: b.TempDir(), Model: c.model}
			s, err := inv.OpenSession(context.Background(), req.Session())
			if err != nil {
				b.Fatalf("OpenSession() error = %v", err)
			}
			// closeAll closes the session and counts the processes of the
			// CLIs (the session's and every cold Invoke's) left after it.
			closeAll := func() int {
				s.Close()
				r := &rig{tag: tag}
				ps := r.survivors()
				if len(ps) > 0 {
					b.Errorf("processes survived the benchmark: %v", ps)
				}
				return len(ps)
			}
			b.Cleanup(func() { closeAll() })
			// A first turn, so that every measured turn is warm.
			srv.Enqueue(fakemodel.Answer("warm"))
			if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "warm up"}); err != nil {
				b.Fatalf("first Turn() error = %v", err)
			}
			b.ResetTimer()
			f(b, srv, inv, req, s)
			b.StopTimer()
			b.ReportMetric(float64(closeAll()), "survivors")
		})
	}
}

// timeTurn runs one turn and returns when its first event came and when it
// returned.
func timeTurn(b *testing.B, run func(func(invoker.Event)) error) [2]time.Duration {
	start := time.Now()
	var first time.Duration
	if err := run(func(invoker.Event) {
		if first == 0 {
			first = time.Since(start)
		}
	}); err != nil {
		b.Fatal(err)
	}
	return [2]time.Duration{first, time.Since(start)}
}

func invokeWith(inv invoker.Invoker, req invoker.Request, on func(invoker.Event)) error {
	req.Prompt, req.OnEvent = "say hi", on
	_, err := inv.Invoke(context.Background(), req)
	return err
}

// cancelAfterModelCall starts a turn whose model stalls, cancels it once
// the model was called, and returns the time from the cancel to the
// turn's return, which must come with the context's error.
func cancelAfterModelCall(b *testing.B, srv *fakemodel.Server, run func(context.Context) error) time.Duration {
	srv.Enqueue(fakemodel.Stall("partial words "))
	before := len(srv.Scripted())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(ctx) }()
	deadline := time.Now().Add(quick)
	for len(srv.Scripted()) == before {
		if time.Now().After(deadline) {
			b.Fatal("the model was not called")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the partial answer is on its way
	at := time.Now()
	cancel()
	err := <-errc
	took := time.Since(at)
	if !errors.Is(err, context.Canceled) {
		b.Fatalf("cancelled turn error = %v, want one matching context.Canceled", err)
	}
	return took
}

func medMs(d []time.Duration) float64 {
	f := make([]float64, len(d))
	for i, x := range d {
		f[i] = float64(x) / float64(time.Millisecond)
	}
	return med(f)
}

func med(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	s := append([]float64(nil), f...)
	sort.Float64s(s)
	return s[len(s)/2]
}
