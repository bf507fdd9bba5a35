package admit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdmissionStress runs many requests of random sizes and gates at
// once, some cancelled while they wait, some gates closed for a moment,
// and checks after every change of the Queue that nothing is over budget,
// that the queue is in order of arrival, and that its head does not fit
// (no wake-up lost); from outside, that what the holders hold never
// exceeds the capacity, that no request waits for good, and that the
// counters add up. Run it with -race.
func TestAdmissionStress(t *testing.T) {
	workers, rounds := 16, 300
	if testing.Short() {
		rounds = 50
	}
	capacity := Amounts{Runs: 6, Memory: 1000}
	q := newChecked(t, capacity)
	var (
		held                        [2]atomic.Int64 // runs and memory held by the workers
		admitted, cancelled, closes atomic.Int64
		wg                          sync.WaitGroup
	)
	keys := []string{"", "a", "b"}
	for i := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range rounds {
				r := Request{
					Need: Amounts{Runs: 1, Memory: rng.Int64N(401)},
					Gate: keys[rng.IntN(len(keys))],
				}
				if rng.IntN(2) == 0 {
					r.OnWait = func(w Wait) {
						if w.Ahead < 0 || (w.Gate != "") != !w.Until.IsZero() || (w.Gate != "" && w.Gate != r.Gate) {
							t.Errorf("told %+v for a request of gate %q", w, r.Gate)
						}
					}
				}
				// A request that may give up does so within a moment; the
				// others must be admitted well within the minute.
				mayCancel := rng.IntN(4) == 0
				wait := time.Minute
				if mayCancel {
					wait = time.Duration(rng.IntN(300)) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				g, err := q.Acquire(ctx, r)
				cancel()
				if err != nil {
					var we *WaitError
					if !mayCancel || !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire(%+v) error = %v", r, err)
						return
					}
					cancelled.Add(1)
					continue
				}
				admitted.Add(1)
				for j, n := range []int64{r.Need.Runs, r.Need.Memory} {
					if now := held[j].Add(n); now > capacity.get(Resource(j+1)) {
						t.Errorf("%v held %d by the holders, over the capacity", Resource(j+1), now)
					}
				}
				if rng.IntN(40) == 0 {
					closes.Add(1)
					q.CloseGate(keys[1+rng.IntN(2)], time.Now().Add(time.Duration(rng.IntN(2000))*time.Microsecond))
				}
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond) // the run
				}
				for j, n := range []int64{r.Need.Runs, r.Need.Memory} {
					held[j].Add(-n)
				}
				g.Release()
			}
		})
	}
	wg.Wait()
	s := q.Stats()
	want := Stats{Admitted: uint64(admitted.Load()), Cancelled: uint64(cancelled.Load())}
	if s.Held != want.Held || s.Holders != 0 || s.Waiting != 0 || s.Gated != 0 || s.Admitted != want.Admitted || s.Cancelled != want.Cancelled || s.Refused != 0 {
		t.Errorf("Stats() = %+v, want %d admitted, %d cancelled, nothing held or waiting", s, want.Admitted, want.Cancelled)
	}
	if s.Admitted+s.Cancelled != uint64(workers*rounds) {
		t.Errorf("%d admitted and %d cancelled of %d requests", s.Admitted, s.Cancelled, workers*rounds)
	}
	t.Logf("%d admitted (%d after waiting), %d cancelled, %d gate closes, %v waited in all", s.Admitted, s.Queued, s.Cancelled, closes.Load(), s.WaitedTotal)
}
