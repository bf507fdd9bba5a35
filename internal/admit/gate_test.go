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

// TestAdmissionGateOpens checks that a request of a closed gate waits
// until the gate's time, told why and until when, while requests of other
// keys, or of none, are not held back.
func TestAdmissionGateOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 4})
		t0 := time.Now()
		until := t0.Add(90 * time.Second)
		q.CloseGate("codex", until)

		p := start(t, q, Request{Need: run(0), Gate: "codex"})
		for _, key := range []string{"claude", ""} {
			g := mustAcquire(t, q, run(0))
			g.Release()
			g, err := q.Acquire(t.Context(), Request{Need: run(0), Gate: key})
			if err != nil || g.Waited() != 0 {
				t.Errorf("Acquire(Gate %q) = %v, %v; want admitted at once", key, g, err)
			}
			g.Release()
		}
		if s := q.Stats(); s.Gated != 1 || s.Waiting != 0 {
			t.Errorf("Stats() = %+v, want 1 at a gate", s)
		}
		time.Sleep(until.Sub(time.Now()) - time.Nanosecond)
		synctest.Wait()
		if p.admitted(t) {
			t.Fatalf("admitted at %v, before the gate's time", time.Since(t0))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !p.admitted(t) {
			t.Fatal("not admitted when the gate opened")
		}
		if p.g.Waited() != 90*time.Second {
			t.Errorf("Waited() = %v, want 1m30s", p.g.Waited())
		}
		if w, want := p.log.get(), []Wait{{Gate: "codex", Until: until}}; !slices.Equal(w, want) {
			t.Errorf("told %v, want %v", w, want)
		}
		if s := q.Stats(); s.Gated != 0 || len(q.gates) != 0 {
			t.Errorf("Stats() = %+v with %d gates, want none left", s, len(q.gates))
		}
	})
}

// TestAdmissionGateOrder checks that the waiters of a gate join the queue,
// when it opens, in the order they arrived, behind the requests that were
// already queued.
func TestAdmissionGateOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 1})
		g := mustAcquire(t, q, run(0))
		until := time.Now().Add(time.Minute)
		q.CloseGate("codex", until)
		var gated []*pending
		for range 3 {
			gated = append(gated, start(t, q, Request{Need: run(0), Gate: "codex"}))
		}
		other := start(t, q, Request{Need: run(0), Gate: "claude"})
		for i, p := range gated {
			if w, _ := p.log.last(); w != (Wait{Ahead: i, Gate: "codex", Until: until}) {
				t.Errorf("gated waiter %d told %v, want %d ahead at the gate", i, p.log.get(), i)
			}
		}
		if w, _ := other.log.last(); w != (Wait{}) {
			t.Errorf("the other waiter told %v, want at the head of the queue", other.log.get())
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, p := range gated {
			if w, _ := p.log.last(); w != (Wait{Ahead: i + 1}) {
				t.Errorf("gated waiter %d told %v once the gate opened, want %d ahead in the queue", i, p.log.get(), i+1)
			}
		}
		for _, p := range append([]*pending{other}, gated...) {
			g.Release()
			synctest.Wait()
			if !p.admitted(t) {
				t.Fatal("not admitted in the order of the queue")
			}
			g = p.g
		}
	})
}

// TestAdmissionGateCancel checks a request cancelled at a gate.
func TestAdmissionGateCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{})
		until := time.Now().Add(time.Hour)
		q.CloseGate("gemini", until)
		a := start(t, q, Request{Need: run(0), Gate: "gemini"})
		b := start(t, q, Request{Need: run(0), Gate: "gemini"})
		time.Sleep(time.Minute)
		a.cancel()
		we := a.waitErr(t)
		if !errors.Is(we, context.Canceled) || we.Gate != "gemini" || !we.Until.Equal(until) || we.Waited != time.Minute || we.Ahead != 0 {
			t.Errorf("error = %+v, want context.Canceled at the gemini gate after 1m", we)
		}
		if msg := we.Error(); !strings.Contains(msg, "gave up after 1m0s waiting for the rate limit of gemini to reset at 2000-01-01T01:00:00Z: context canceled") {
			t.Errorf("error = %q", msg)
		}
		synctest.Wait()
		if w, _ := b.log.last(); w.Ahead != 0 {
			t.Errorf("the waiter behind told %v, want 0 ahead", b.log.get())
		}
		if s := q.Stats(); s.Gated != 1 || s.Cancelled != 1 || s.WaitedTotal != time.Minute {
			t.Errorf("Stats() = %+v, want 1 at the gate, 1 cancelled after 1m", s)
		}
	})
}

// TestAdmissionGatePushedBack checks that a gate's time is only ever
// pushed back, and that its waiters are told.
func TestAdmissionGatePushedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{})
		t0 := time.Now()
		t1, t2 := t0.Add(time.Minute), t0.Add(5*time.Minute)
		q.CloseGate("claude", t1)
		p := start(t, q, Request{Need: run(0), Gate: "claude"})
		q.CloseGate("claude", t2)
		synctest.Wait()
		if w, _ := p.log.last(); !w.Until.Equal(t2) {
			t.Errorf("told %v once the gate was pushed back, want last until %v", p.log.get(), t2)
		}
		q.CloseGate("claude", t1.Add(time.Second)) // earlier than t2: ignored
		q.CloseGate("claude", t0.Add(-time.Hour))  // past: ignored
		synctest.Wait()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if p.admitted(t) {
			t.Fatal("admitted at the gate's first time, after it was pushed back")
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if !p.admitted(t) || p.g.Waited() != 5*time.Minute {
			t.Fatalf("not admitted at the later time (waited %v)", p.g.Waited())
		}
		want := []Wait{{Gate: "claude", Until: t1}, {Gate: "claude", Until: t2}}
		if w := p.log.get(); !slices.Equal(w, want) {
			t.Errorf("told %v, want %v", w, want)
		}
	})
}

// TestAdmissionGateBack checks that closing a gate sends the requests of
// its key still queued for the budget back to it, in the order they
// arrived, and that a request then at the head that fits is admitted.
func TestAdmissionGateBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Memory: 100})
		g := mustAcquire(t, q, Amounts{Memory: 50})
		late := start(t, q, Request{Need: Amounts{Memory: 80}, Gate: "codex"})
		fits := start(t, q, Request{Need: Amounts{Memory: 30}, Gate: "claude"})
		later := start(t, q, Request{Need: Amounts{Memory: 10}, Gate: "codex"})
		until := time.Now().Add(time.Minute)
		gated := start(t, q, Request{Need: Amounts{Memory: 10}, Gate: "codex"}) // queued too, for now
		q.CloseGate("codex", until)
		synctest.Wait()
		if !fits.admitted(t) {
			t.Error("the claude request at the head, fitting, not admitted when the codex one ahead went back to the gate")
		}
		for i, p := range []*pending{late, later, gated} {
			if p.admitted(t) {
				t.Fatalf("codex request %d admitted with its gate closed", i)
			}
			if w, _ := p.log.last(); w != (Wait{Ahead: i, Gate: "codex", Until: until}) {
				t.Errorf("codex request %d told %v, want %d ahead at the gate", i, p.log.get(), i)
			}
		}
		g.Release()
		fits.g.Release()
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, p := range []*pending{late, later, gated} {
			if !p.admitted(t) {
				t.Errorf("codex request %d not admitted once the gate opened and 100 were free", i)
			}
		}
	})
}

// TestAdmissionGateExpired checks that a gate whose time passed with
// nobody waiting holds back nobody, and is forgotten.
func TestAdmissionGateExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{})
		q.CloseGate("codex", time.Now().Add(time.Second))
		time.Sleep(time.Second - time.Nanosecond)
		p := start(t, q, Request{Gate: "codex"})
		if p.admitted(t) {
			t.Fatal("admitted a nanosecond before the gate's time")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !p.admitted(t) {
			t.Fatal("not admitted at the gate's time")
		}
		q.CloseGate("codex", time.Now().Add(time.Second))
		time.Sleep(time.Second)
		mustAcquire(t, q, Amounts{}).Release()
		if len(q.gates) != 1 {
			t.Errorf("%d gates, want the codex one still there (no request named it)", len(q.gates))
		}
		g, err := q.Acquire(t.Context(), Request{Gate: "codex"})
		if err != nil || g.Waited() != 0 {
			t.Fatalf("Acquire() = %v, %v; want admitted at once", g, err)
		}
		g.Release()
		if len(q.gates) != 0 {
			t.Errorf("%d gates left, want none", len(q.gates))
		}
	})
}

// TestAdmissionBackpressure plays a rate limit as the engine meets it: of
// runs of one backend, one fails rate-limited with the reset time its
// provider gave, and the runs that had not started yet wait until then,
// instead of starting and failing; runs already under way go on.
func TestAdmissionBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 2})
		t0 := time.Now()
		reset := t0.Add(time.Minute)
		var (
			mu      sync.Mutex
			started []time.Duration
			wg      sync.WaitGroup
		)
		for i := range 6 {
			wg.Go(func() {
				g, err := q.Acquire(t.Context(), Request{Need: run(0), Gate: "codex"})
				if err != nil {
					t.Errorf("run %d: Acquire() error = %v", i, err)
					return
				}
				defer g.Release()
				mu.Lock()
				started = append(started, time.Since(t0))
				mu.Unlock()
				if i == 0 {
					// The first run fails after 5s: the provider's 429
					// says the limit resets a minute after the start.
					time.Sleep(5 * time.Second)
					q.CloseGate("codex", reset)
					return
				}
				time.Sleep(10 * time.Second)
			})
			synctest.Wait()
		}
		wg.Wait()
		// Runs 0 and 1 start at once; run 0 fails at 5s, when the four
		// others, queued for the budget, go back to the gate; run 1 goes
		// on until 10s. The four start at the reset, two at a time.
		want := []time.Duration{0, 0, time.Minute, time.Minute, time.Minute + 10*time.Second, time.Minute + 10*time.Second}
		if !slices.Equal(started, want) {
			t.Errorf("runs started at %v, want %v", started, want)
		}
	})
}

// TestAdmissionGateNone checks that the key "" closes no gate: requests
// that name none never see one.
func TestAdmissionGateNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newChecked(t, Amounts{Runs: 1})
		g := mustAcquire(t, q, run(0))
		p := start(t, q, Request{Need: run(0)})
		q.CloseGate("", time.Now().Add(time.Hour))
		synctest.Wait()
		if w := p.log.get(); !slices.Equal(w, []Wait{{}}) {
			t.Errorf("told %v, want only 0 ahead in the queue", w)
		}
		g.Release()
		synctest.Wait()
		if !p.admitted(t) {
			t.Error("not admitted when the grant ahead was released")
		}
	})
}
