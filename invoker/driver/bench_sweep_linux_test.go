package driver_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// BenchmarkCancelledTurnSweep measures what the sweep of a cancelled
// session turn adds to the time from the cancel to Turn's return: the
// same turn of Claude Code's fake, which starts a grandchild, a setsid
// daemon and an env -i daemon and then stalls, cancelled at its first
// message, with the sweep (the engine's behaviour) and without it, back
// to back in every iteration (alternating which goes first). It reports
// the medians (sweep-ms, nosweep-ms) and their ratio (sweep-x). The two
// sessions run on one Invoker, the second without the sweep; the
// processes its turns leave are killed by pid between iterations, outside
// the timed part.
func BenchmarkCancelledTurnSweep(b *testing.B) {
	s := fakeagent.Script{Flavor: fakeagent.Claude, TurnSpawns: true, RecordDir: b.TempDir(), Tag: fakeagent.NewTag()}
	inv := claude.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond})
	open := func(inv invoker.Invoker) invoker.Session {
		sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: b.TempDir(), Env: s.Env()})
		if err != nil {
			b.Fatalf("OpenSession() error = %v", err)
		}
		return sess
	}
	swept, kept := open(inv), open(driver.WithoutCancelledSweep(inv))
	defer func() {
		swept.Close()
		kept.Close()
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill()
		}
		if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
			b.Errorf("processes survived the benchmark: %v", left)
		}
	}()
	turn := func(sweep bool) time.Duration {
		sess := kept
		if sweep {
			sess = swept
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var at time.Time
		_, err := sess.Turn(ctx, invoker.TurnRequest{Prompt: "work " + fakeagent.PromptStall, OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage && at.IsZero() {
				at = time.Now()
				cancel()
			}
		}})
		if at.IsZero() || err == nil {
			b.Fatalf("Turn() = %v before its first message was cancelled", err)
		}
		return time.Since(at)
	}
	var with, without []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			with = append(with, turn(true))
			without = append(without, turn(false))
		} else {
			without = append(without, turn(false))
			with = append(with, turn(true))
		}
		i++
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			var left []fakeagent.Proc
			for _, p := range rec.Procs {
				if p.Turn > 0 {
					left = append(left, p)
				}
			}
			(&fakeagent.Record{Procs: left}).Kill() // the unswept turn's
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	w, wo := ms(medianDuration(with)), ms(medianDuration(without))
	b.ReportMetric(w, "sweep-ms")
	b.ReportMetric(wo, "nosweep-ms")
	if wo > 0 {
		b.ReportMetric(w/wo, "sweep-x")
	}
}
