package admit

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// FuzzAdmission plays a sequence of operations (requests of random sizes
// and gates, releases, cancels, gate closes, time passing) on a Queue in a
// synctest bubble, and after each one compares the Queue with a model of
// its documented behaviour, written as plainly as possible: who is
// admitted, who waits where and with how many ahead (as OnWait last told
// it), what is held, how long each admitted request waited. The seed
// corpus holds random sequences, so go test plays them too.
func FuzzAdmission(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 64 {
		b := make([]byte, 2*(8+rng.IntN(56)))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		synctest.Test(t, func(t *testing.T) { playModel(t, ops) })
	})
}

// A modelReq is a request in the model, and the real one beside it.
type modelReq struct {
	need     Amounts
	key      string
	ticket   int
	arrived  time.Time
	admitted time.Time // when the model admitted it; zero while it waits
	p        *pending
	gone     bool // released, or cancelled
}

// model is the reference: a FIFO queue of requests, a gate for key "a",
// what is held.
type model struct {
	capacity Amounts
	held     Amounts
	queue    []*modelReq // waiting for the budget, in order
	gate     []*modelReq // waiting at gate "a", in order of arrival
	until    time.Time   // gate "a" is closed until then
}

func (m *model) closed(now time.Time) bool { return m.until.After(now) }

// admit admits from the head while the head fits.
func (m *model) admit(now time.Time) {
	for len(m.queue) > 0 && fits(m.capacity, m.held, m.queue[0].need) {
		r := m.queue[0]
		m.queue = m.queue[1:]
		m.held = m.held.add(r.need)
		r.admitted = now
	}
}

// open lets the gate's waiters into the queue once its time has come.
func (m *model) open(now time.Time) {
	if !m.until.IsZero() && !m.closed(now) {
		m.queue = append(m.queue, m.gate...)
		m.gate = nil
		m.until = time.Time{}
		m.admit(now)
	}
}

func playModel(t *testing.T, ops []byte) {
	m := &model{capacity: Amounts{Runs: 3, Memory: 100}}
	q := newChecked(t, m.capacity)
	t0 := time.Now()
	var all []*modelReq
	pick := func(b byte, match func(*modelReq) bool) *modelReq {
		var rs []*modelReq
		for _, r := range all {
			if !r.gone && match(r) {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			return nil
		}
		return rs[int(b)%len(rs)]
	}
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i]%5, ops[i+1]
		now := time.Now()
		switch op {
		case 0: // a request
			r := &modelReq{need: Amounts{Runs: 1, Memory: int64(arg%5) * 25}, ticket: len(all), arrived: now}
			if arg&0x80 != 0 {
				r.key = "a"
			}
			all = append(all, r)
			switch {
			case r.key == "a" && m.closed(now):
				m.gate = append(m.gate, r)
			case len(m.queue) == 0 && fits(m.capacity, m.held, r.need):
				m.held = m.held.add(r.need)
				r.admitted = now
			default:
				m.queue = append(m.queue, r)
			}
			r.p = start(t, q, Request{Need: r.need, Gate: r.key})
		case 1: // a release
			r := pick(arg, func(r *modelReq) bool { return !r.admitted.IsZero() })
			if r == nil {
				continue
			}
			r.gone = true
			m.held = m.held.sub(r.need)
			m.admit(now)
			r.p.g.Release()
		case 2: // a cancel
			r := pick(arg, func(r *modelReq) bool { return r.admitted.IsZero() })
			if r == nil {
				continue
			}
			r.gone = true
			if i := slices.Index(m.queue, r); i >= 0 {
				m.queue = slices.Delete(m.queue, i, i+1)
				if i == 0 {
					m.admit(now)
				}
			} else {
				i := slices.Index(m.gate, r)
				m.gate = slices.Delete(m.gate, i, i+1)
			}
			r.p.cancel()
			var we *WaitError
			if <-r.p.done; !errors.As(r.p.err, &we) || !errors.Is(we, context.Canceled) {
				t.Fatalf("op %d: cancelled request %d: Acquire() = %v, %v", i/2, r.ticket, r.p.g, r.p.err)
			}
		case 3: // gate "a" closes
			until := now.Add(time.Duration(arg%4) * time.Second)
			if until.After(now) && until.After(m.until) {
				m.until = until
				head := len(m.queue) > 0 && m.queue[0].key == "a"
				for _, r := range m.queue {
					if r.key == "a" {
						m.gate = append(m.gate, r)
					}
				}
				m.queue = slices.DeleteFunc(m.queue, func(r *modelReq) bool { return r.key == "a" })
				slices.SortFunc(m.gate, func(a, b *modelReq) int { return a.ticket - b.ticket })
				if head {
					m.admit(now)
				}
			}
			q.CloseGate("a", until)
		case 4: // time passes
			d := time.Duration(arg%3) * time.Second
			time.Sleep(d)
			if !m.until.IsZero() && !m.until.After(time.Now()) {
				m.open(m.until) // its waiters join the queue at its time
			}
		}
		synctest.Wait()
		m.compare(t, i/2, q, all, t0)
		if t.Failed() {
			t.FailNow()
		}
	}
}

// compare checks the Queue against the model.
func (m *model) compare(t *testing.T, op int, q *Queue, all []*modelReq, t0 time.Time) {
	t.Helper()
	for _, r := range all {
		if r.gone {
			continue
		}
		ok := r.p.admitted(t)
		switch {
		case ok && r.admitted.IsZero():
			t.Errorf("op %d: request %d (%+v, gate %q) admitted, the model has it waiting", op, r.ticket, r.need, r.key)
		case !ok && !r.admitted.IsZero():
			t.Errorf("op %d: request %d (%+v, gate %q) waits, the model admitted it at %v", op, r.ticket, r.need, r.key, r.admitted.Sub(t0))
		case ok && r.p.g.Waited() != r.admitted.Sub(r.arrived):
			t.Errorf("op %d: request %d waited %v, the model %v", op, r.ticket, r.p.g.Waited(), r.admitted.Sub(r.arrived))
		case !ok:
			want := Wait{Ahead: slices.Index(m.queue, r)}
			if i := slices.Index(m.gate, r); i >= 0 {
				want = Wait{Ahead: i, Gate: "a", Until: m.until}
			}
			if w, _ := r.p.log.last(); w != want {
				t.Errorf("op %d: request %d told %+v last, the model has %+v", op, r.ticket, w, want)
			}
		}
	}
	if s := q.Stats(); s.Held != m.held || s.Waiting != len(m.queue) || s.Gated != len(m.gate) {
		t.Errorf("op %d: Stats() = %+v; the model holds %+v, %d waiting, %d at the gate", op, s, m.held, len(m.queue), len(m.gate))
	}
}
