package admit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/semaphore"
)

// BenchmarkAdmission measures an Acquire that fits at once and its
// Release, the cost every run pays when the host is not full, beside a
// bare sync.Mutex Lock and Unlock and x/sync/semaphore's Weighted in the
// same run.
func BenchmarkAdmission(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background()) // a Done channel, as a run's context has
	defer cancel()
	need := run(200 * MiB)
	b.Run("admit", func(b *testing.B) {
		q := New(Amounts{Memory: 1 << 30})
		b.ReportAllocs()
		for b.Loop() {
			g, err := q.Acquire(ctx, Request{Need: need})
			if err != nil {
				b.Fatal(err)
			}
			g.Release()
		}
	})
	b.Run("admit-gate", func(b *testing.B) {
		q := New(Amounts{Runs: 5, Memory: 1 << 30})
		b.ReportAllocs()
		for b.Loop() {
			g, err := q.Acquire(ctx, Request{Need: need, Gate: "codex"})
			if err != nil {
				b.Fatal(err)
			}
			g.Release()
		}
	})
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			mu.Unlock() //nolint:staticcheck // the baseline is an empty critical section
		}
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 30)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 200*MiB); err != nil {
				b.Fatal(err)
			}
			s.Release(200 * MiB)
		}
	})
}

// BenchmarkAdmissionParallel measures Acquire and Release from every
// processor at once: with room for all (the lock contended, nobody
// waiting), and with room for one (nearly every request waits), beside
// x/sync/semaphore's Weighted doing the same.
func BenchmarkAdmissionParallel(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		runs int64
	}{{"room", 1 << 20}, {"one", 1}} {
		b.Run(c.name+"/admit", func(b *testing.B) {
			q := New(Amounts{Runs: c.runs})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					g, err := q.Acquire(ctx, Request{Need: Amounts{Runs: 1}})
					if err != nil {
						b.Error(err)
						return
					}
					g.Release()
				}
			})
		})
		b.Run(c.name+"/semaphore", func(b *testing.B) {
			s := semaphore.NewWeighted(c.runs)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Acquire(ctx, 1); err != nil {
						b.Error(err)
						return
					}
					s.Release(1)
				}
			})
		})
	}
}

// BenchmarkAdmissionQueue measures one admission with many requests
// waiting behind it, each told its new position by OnWait: the cost of a
// change grows with the queue, as every waiter behind is told.
func BenchmarkAdmissionQueue(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			q := New(Amounts{Runs: 1})
			var (
				count atomic.Int64
				wg    sync.WaitGroup
			)
			b.ReportAllocs()
			b.ResetTimer()
			for range n + 1 {
				wg.Go(func() {
					for {
						g, err := q.Acquire(context.Background(), Request{Need: Amounts{Runs: 1}, OnWait: func(Wait) {}})
						if err != nil {
							b.Error(err)
							return
						}
						last := count.Add(1) >= int64(b.N)
						g.Release()
						if last {
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
