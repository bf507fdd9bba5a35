package admit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestAdmissionBudget runs many requests of one size against a budget, as
// runs of 200 MiB each against a host budget of 1 GiB: never more at once
// than fit, every one finishes, and each that waited reports its wait and
// its positions, in order.
func TestAdmissionBudget(t *testing.T) {
	const hold = time.Second
	tests := []struct {
		name     string
		capacity Amounts
		need     Amounts
		n        int
		most     int // the most that fit at once
	}{
		{"40 runs of 200 MiB in 1 GiB", Amounts{Memory: 1 << 30}, run(200 * MiB), 40, 5},
		{"runs only", Amounts{Runs: 5}, run(200 * MiB), 40, 5},
		{"runs tighter than memory", Amounts{Runs: 3, Memory: 1 << 30}, run(200 * MiB), 20, 3},
		{"memory tighter than runs", Amounts{Runs: 8, Memory: 1 << 30}, run(300 * MiB), 20, 3},
		{"exactly the whole budget each", Amounts{Memory: 1 << 30}, run(1 << 30), 5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newChecked(t, tt.capacity)
				var (
					mu         sync.Mutex
					now, most  int
					wg         sync.WaitGroup
					waited     = make([]time.Duration, tt.n)
					logs       = make([]waitLog, tt.n)
					errs       = make([]error, tt.n)
					t0         = time.Now()
					admittedAt = make([]time.Duration, tt.n)
				)
				for i := range tt.n {
					wg.Go(func() {
						g, err := q.Acquire(t.Context(), Request{Need: tt.need, OnWait: logs[i].onWait})
						if err != nil {
							errs[i] = err
							return
						}
						admittedAt[i] = time.Since(t0)
						waited[i] = g.Waited()
						mu.Lock()
						now++
						most = max(most, now)
						mu.Unlock()
						time.Sleep(hold) // the run
						mu.Lock()
						now--
						mu.Unlock()
						g.Release()
					})
					synctest.Wait() // admitted or waiting: arrivals in order
				}
				wg.Wait()

				if most != tt.most {
					t.Errorf("%d held at once at most, want %d", most, tt.most)
				}
				for i := range tt.n {
					if errs[i] != nil {
						t.Errorf("request %d: Acquire() error = %v", i, errs[i])
						continue
					}
					// FIFO: request i is admitted with the i/most-th batch.
					want := time.Duration(i/tt.most) * hold
					if waited[i] != want || admittedAt[i] != want {
						t.Errorf("request %d: waited %v, admitted at %v; want %v", i, waited[i], admittedAt[i], want)
					}
					w := logs[i].get()
					if i < tt.most {
						if len(w) != 0 {
							t.Errorf("request %d fit at once, and was told %v", i, w)
						}
						continue
					}
					if len(w) == 0 || w[0].Ahead != i-tt.most {
						t.Errorf("request %d was told %v, want first %d ahead", i, w, i-tt.most)
						continue
					}
					for j := 1; j < len(w); j++ {
						if w[j].Ahead >= w[j-1].Ahead || w[j].Gate != "" {
							t.Errorf("request %d was told %v: positions not decreasing", i, w)
							break
						}
					}
				}
				s := q.Stats()
				var total time.Duration
				for _, d := range waited {
					total += d
				}
				want := Stats{Admitted: uint64(tt.n), Queued: uint64(tt.n - tt.most), WaitedTotal: total}
				if s != want {
					t.Errorf("Stats() = %+v, want %+v", s, want)
				}
			})
		})
	}
}

// TestAdmissionFIFO checks that requests are admitted in the order they
// arrived, and that a large request at the head holds back small ones that
// would fit.
func TestAdmissionFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Memory: 1000})
		first := mustAcquire(t, q, Amounts{Memory: 600})
		big := start(t, q, Request{Need: Amounts{Memory: 800}})
		small := start(t, q, Request{Need: Amounts{Memory: 100}}) // fits in the 400 left, but is behind big

		if big.admitted(t) || small.admitted(t) {
			t.Fatal("admitted with 600 of 1000 held: big does not fit, and small is behind it")
		}
		if w, _ := small.log.last(); w.Ahead != 1 {
			t.Errorf("small was told %v, want 1 ahead", small.log.get())
		}
		if s := q.Stats(); s.Waiting != 2 || s.Held.Memory != 600 {
			t.Errorf("Stats() = %+v, want 2 waiting and 600 held", s)
		}
		first.Release()
		synctest.Wait()
		if !big.admitted(t) || !small.admitted(t) {
			t.Fatal("not both admitted once 1000 were free")
		}
		// A small one arriving now waits behind nobody, but does not fit.
		late := start(t, q, Request{Need: Amounts{Memory: 200}})
		if late.admitted(t) {
			t.Fatal("admitted with 900 of 1000 held")
		}
		big.g.Release()
		synctest.Wait()
		if !late.admitted(t) {
			t.Fatal("not admitted once 800 were released")
		}
	})
}

// TestAdmissionOrder checks the order of admission among waiters of
// different sizes: each release admits the waiters at the head that then
// fit, and none behind one that does not.
func TestAdmissionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 10, Memory: 100})
		all := mustAcquire(t, q, run(100))
		sizes := []int64{50, 10, 60, 10, 30, 100, 1}
		var ps []*pending
		for _, m := range sizes {
			ps = append(ps, start(t, q, Request{Need: run(m)}))
		}
		// Release the grants in the order they were given, one at a
		// time, noting which waiters each release admits.
		var (
			held    = []*Grant{all}
			batches [][]int
			seen    = make([]bool, len(ps))
		)
		for len(held) > 0 {
			held[0].Release()
			held = held[1:]
			synctest.Wait()
			batch := []int{}
			for i, p := range ps {
				if !seen[i] && p.admitted(t) {
					seen[i] = true
					batch = append(batch, i)
					held = append(held, p.g)
				}
			}
			batches = append(batches, batch)
		}
		want := [][]int{{0, 1}, {2, 3}, {4}, {}, {}, {5}, {6}, {}}
		if !slices.EqualFunc(batches, want, slices.Equal) {
			t.Errorf("releases admitted %v, want %v", batches, want)
		}
	})
}

// TestAdmissionReleaseWakesSeveral checks that one Release admits every
// waiter that then fits, at once, and tells those left their new
// positions.
func TestAdmissionReleaseWakesSeveral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Memory: 1 << 30})
		big := mustAcquire(t, q, run(1<<30))
		var ps []*pending
		for range 5 {
			ps = append(ps, start(t, q, Request{Need: run(256 * MiB)}))
		}
		if w, _ := ps[4].log.last(); w.Ahead != 4 {
			t.Errorf("the fifth waiter was told %v, want 4 ahead", ps[4].log.get())
		}
		big.Release()
		synctest.Wait()
		for i, p := range ps[:4] {
			if !p.admitted(t) {
				t.Errorf("waiter %d not admitted by the release of 1 GiB", i)
			}
		}
		if ps[4].admitted(t) {
			t.Error("the fifth waiter of 256 MiB admitted beside four in 1 GiB")
		}
		if w, _ := ps[4].log.last(); w.Ahead != 0 {
			t.Errorf("the fifth waiter was told %v, want last 0 ahead", ps[4].log.get())
		}
		if s := q.Stats(); s.Holders != 4 || s.Held.Memory != 1<<30 || s.Waiting != 1 {
			t.Errorf("Stats() = %+v, want 4 holding 1 GiB, 1 waiting", s)
		}
	})
}

// TestAdmissionTooLarge checks that a request that can never fit is
// refused at once, typed, holding nothing and holding back no one.
func TestAdmissionTooLarge(t *testing.T) {
	tests := []struct {
		name     string
		capacity Amounts
		need     Amounts
		resource Resource
		msg      string
	}{
		{"memory", Amounts{Runs: 5, Memory: 1 << 30}, run(2 << 30), Memory, "a request of 2 GiB can never fit the budget of 1 GiB: lower the request's memory limit"},
		{"runs", Amounts{Runs: 1}, Amounts{Runs: 2}, Runs, "a request of 2 runs can never fit the budget of 1 run"},
		{"first of two", Amounts{Runs: 1, Memory: 1 << 30}, Amounts{Runs: 2, Memory: 2 << 30}, Runs, "2 runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newChecked(t, tt.capacity)
			g, err := q.Acquire(t.Context(), Request{Need: tt.need})
			var tl *TooLargeError
			if g != nil || !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Acquire() = %v, %v; want a *TooLargeError", g, err)
			}
			if tl.Resource != tt.resource || tl.Need != tt.need.get(tt.resource) || tl.Capacity != tt.capacity.get(tt.resource) {
				t.Errorf("error = %+v, want %v %d of %d", tl, tt.resource, tt.need.get(tt.resource), tt.capacity.get(tt.resource))
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %q, want it to say %q", err, tt.msg)
			}
			if s := q.Stats(); s != (Stats{Refused: 1}) {
				t.Errorf("Stats() = %+v, want only 1 refused", s)
			}
			// The queue is as it was: a request that fits is admitted.
			mustAcquire(t, q, Amounts{Runs: 1}).Release()
		})
	}
}

// TestAdmissionCancel checks a request whose context is done while it
// waits: a typed error matching the context's, nothing held, and the
// requests behind it moved up (or admitted, when it held them back).
func TestAdmissionCancel(t *testing.T) {
	tests := []struct {
		name     string
		needs    []int64 // memory of the waiters, in order, behind 900 of 1000 held
		cancel   int     // the waiter whose context is cancelled
		admitted []int   // waiters admitted then
		ahead    []int   // positions of the waiters still waiting
	}{
		{"the head, letting the next in", []int64{500, 100, 50}, 0, []int{1}, []int{0}},
		{"the head, the next still too big", []int64{500, 400, 50}, 0, nil, []int{0, 1}},
		{"in the middle", []int64{500, 400, 50}, 1, nil, []int{0, 1}},
		{"the tail", []int64{500, 400, 50}, 2, nil, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newChecked(t, Amounts{Memory: 1000})
				mustAcquire(t, q, Amounts{Memory: 900})
				var ps []*pending
				for _, m := range tt.needs {
					ps = append(ps, start(t, q, Request{Need: Amounts{Memory: m}}))
				}
				time.Sleep(3 * time.Second)
				ps[tt.cancel].cancel()
				we := ps[tt.cancel].waitErr(t)
				if !errors.Is(we, context.Canceled) || we.Ahead != tt.cancel || we.Waited != 3*time.Second || we.Gate != "" {
					t.Errorf("error = %+v, want context.Canceled after 3s with %d ahead", we, tt.cancel)
				}
				synctest.Wait()
				var left []int
				for i, p := range ps {
					if i == tt.cancel {
						continue
					}
					if p.admitted(t) {
						if !slices.Contains(tt.admitted, i) {
							t.Errorf("waiter %d admitted", i)
						}
						continue
					}
					if slices.Contains(tt.admitted, i) {
						t.Errorf("waiter %d not admitted", i)
					}
					w, _ := p.log.last()
					left = append(left, w.Ahead)
				}
				if !slices.Equal(left, tt.ahead) {
					t.Errorf("the waiters left were last told %v ahead, want %v", left, tt.ahead)
				}
				s := q.Stats()
				if s.Cancelled != 1 || s.Held.Memory != 900+sum(tt.needs, tt.admitted) || s.Waiting != len(tt.ahead) {
					t.Errorf("Stats() = %+v, want 1 cancelled, %d waiting", s, len(tt.ahead))
				}
			})
		})
	}
}

func sum(needs []int64, idx []int) (n int64) {
	for _, i := range idx {
		n += needs[i]
	}
	return n
}

// TestAdmissionDeadline checks a wait ended by a deadline.
func TestAdmissionDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 1})
		g := mustAcquire(t, q, Amounts{Runs: 1})
		defer g.Release()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := q.Acquire(ctx, Request{Need: Amounts{Runs: 1}})
		var we *WaitError
		if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) || we.Waited != time.Minute {
			t.Fatalf("Acquire() error = %v, want a *WaitError after 1m matching context.DeadlineExceeded", err)
		}
		if want := "admit: gave up after 1m0s in the queue for the budget, 0 ahead: context deadline exceeded"; err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		if s := q.Stats(); s.Holders != 1 || s.Waiting != 0 || s.Cancelled != 1 || s.WaitedTotal != time.Minute {
			t.Errorf("Stats() = %+v", s)
		}
	})
}

// TestAdmissionDoneBefore checks that a context done before Acquire
// admits nothing, even when the request fits.
func TestAdmissionDoneBefore(t *testing.T) {
	q := newChecked(t, Amounts{Runs: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	g, err := q.Acquire(ctx, Request{Need: Amounts{Runs: 1}})
	var we *WaitError
	if g != nil || !errors.As(err, &we) || !errors.Is(err, context.Canceled) || we.Waited != 0 {
		t.Fatalf("Acquire() = %v, %v; want a *WaitError matching context.Canceled", g, err)
	}
	if s := q.Stats(); s != (Stats{Cancelled: 1}) {
		t.Errorf("Stats() = %+v, want nothing held, 1 cancelled", s)
	}
}

// TestAdmissionAdmittedWhileCancelled checks a request admitted while its
// context was done, before its goroutine saw either: it gives its grant
// back and fails, and the grant goes to the next waiter.
func TestAdmissionAdmittedWhileCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 1})
		g := mustAcquire(t, q, Amounts{Runs: 1})
		told, goOn := make(chan Wait), make(chan struct{})
		p := start(t, q, Request{Need: Amounts{Runs: 1}, OnWait: func(w Wait) {
			told <- w
			<-goOn
		}})
		<-told // p waits in OnWait, on its own goroutine
		next := start(t, q, Request{Need: Amounts{Runs: 1}})
		g.Release() // admits p
		p.cancel()
		close(goOn)
		we := p.waitErr(t)
		if !errors.Is(we, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", we)
		}
		synctest.Wait()
		if !next.admitted(t) {
			t.Error("the grant given back did not go to the next waiter")
		}
		if s := q.Stats(); s.Admitted != 2 || s.Cancelled != 1 || s.Holders != 1 {
			t.Errorf("Stats() = %+v, want 2 admitted (the first and the next), 1 cancelled, 1 holding", s)
		}
	})
}

// TestAdmissionOnWaitPanics checks that a request whose OnWait panics
// leaves the queue holding nothing, and the panic goes on.
func TestAdmissionOnWaitPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 1})
		g := mustAcquire(t, q, Amounts{Runs: 1})
		behind := start(t, q, Request{Need: Amounts{Runs: 1}})
		_ = behind
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("recovered %v, want the panic of OnWait", v)
				}
			}()
			q.Acquire(t.Context(), Request{Need: Amounts{Runs: 1}, OnWait: func(Wait) { panic("boom") }})
		}()
		if s := q.Stats(); s.Waiting != 1 || s.Cancelled != 1 {
			t.Errorf("Stats() = %+v, want 1 waiting (the one before), 1 cancelled", s)
		}
		g.Release()
		synctest.Wait()
		if !behind.admitted(t) {
			t.Error("the waiter before the panicking one not admitted")
		}
	})
}

// TestAdmissionGrant checks Release's idempotence and the nil Queue.
func TestAdmissionGrant(t *testing.T) {
	q := newChecked(t, Amounts{Runs: 1, Memory: 100})
	g := mustAcquire(t, q, Amounts{Runs: 1, Memory: 60})
	if s := q.Stats(); s.Holders != 1 || s.Held != (Amounts{Runs: 1, Memory: 60}) {
		t.Errorf("Stats() = %+v, want the grant holding 1 run of 60", s)
	}
	g.Release()
	g.Release() // does nothing
	if s := q.Stats(); s.Holders != 0 || s.Held != (Amounts{}) {
		t.Errorf("Stats() after two Releases = %+v, want nothing held", s)
	}

	var nq *Queue
	g, err := nq.Acquire(t.Context(), Request{Need: run(1 << 40)})
	if g != nil || err != nil {
		t.Fatalf("nil Queue: Acquire() = %v, %v; want nil, nil", g, err)
	}
	g.Release()
	nq.CloseGate("codex", time.Now().Add(time.Hour))
	if g.Waited() != 0 || nq.Stats() != (Stats{}) || nq.Capacity() != (Amounts{}) {
		t.Error("a nil Queue or Grant reports something")
	}
}

// TestAdmissionNegative checks that negative amounts panic.
func TestAdmissionNegative(t *testing.T) {
	for name, f := range map[string]func(){
		"New":     func() { New(Amounts{Memory: -1}) },
		"Acquire": func() { New(Amounts{}).Acquire(context.Background(), Request{Need: Amounts{Runs: -1}}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v, _ := recover().(string); !strings.HasPrefix(v, "admit: negative") {
					t.Errorf("recovered %q, want an admit panic", v)
				}
			}()
			f()
		})
	}
}
