package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// The host's Budget: runs that do not fit wait, first come first served,
// visibly, cancellably, and before anything of them starts.

// running counts the runs whose CLI is running, from its first event to
// its last: both are delivered while its process lives, and the Budget
// gives a run's share back only once its tree is reaped, after its last
// event. So the most at once is never more than the Budget admits.
type running struct {
	n, most atomic.Int32
}

func (c *running) on(ev invoker.Event) {
	switch ev.Kind {
	case invoker.KindSession:
		n := c.n.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
	case invoker.KindDone:
		c.n.Add(-1)
	}
}

// 40 runs of 200 MiB each against a budget of 1 GiB: never more than 5 at
// once, all finish, and the waits are reported (Result.Queued, KindQueued
// events, in the order of the queue).
func TestAdmissionMemoryBudget(t *testing.T) {
	budget := &invoker.Budget{Memory: 1 << 30}
	r := newLimitRun(t, fakeagent.Script{StreamFor: 100 * time.Millisecond},
		invoker.Options{Budget: budget, Limits: invoker.Limits{Memory: 200 * mib}})
	requireLimits(t, r.inv, "Memory")
	var c running
	var queuedEvents, waited atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			req := r.req
			var mu sync.Mutex
			var qs []invoker.Event
			req.OnEvent = func(ev invoker.Event) {
				c.on(ev)
				if ev.Kind == invoker.KindQueued {
					mu.Lock()
					qs = append(qs, ev)
					mu.Unlock()
					queuedEvents.Add(1)
				}
			}
			res, err := r.inv.Invoke(context.Background(), req)
			switch {
			case err != nil:
				errs[i] = err
			case res.Text != fakeagent.DefaultAnswer:
				errs[i] = fmt.Errorf("Text = %q", res.Text)
			case res.Queued > 0 && len(qs) == 0:
				errs[i] = fmt.Errorf("queued %v without a KindQueued event", res.Queued)
			case res.Queued > 0:
				waited.Add(1)
				for k, q := range qs {
					if q.Text != fmt.Sprintf("queued: %d ahead", q.Ahead) || k > 0 && q.Ahead >= qs[k-1].Ahead {
						errs[i] = fmt.Errorf("KindQueued events %+v: want places that only move up, said in Text", qs)
					}
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	t.Logf("most runs at once: %d; %d runs waited, %d KindQueued events", c.most.Load(), waited.Load(), queuedEvents.Load())
	if m := c.most.Load(); m > 5 || m < 2 {
		t.Errorf("at most %d runs at once, want 5 (1 GiB / 200 MiB), and more than one", m)
	}
	if waited.Load() < 20 {
		t.Errorf("%d of 40 runs waited, want most of them (5 fit at once)", waited.Load())
	}
}

// A Budget of runs holds a session until Close; a run that waits is
// cancelled by its context with an error that matches the context's, says
// it was queued and how many were ahead, and nothing of it started.
func TestAdmissionCancelWhileWaiting(t *testing.T) {
	budget := &invoker.Budget{Runs: 1}
	holder := newLimitRun(t, fakeagent.Script{}, invoker.Options{Budget: budget})
	s, err := holder.inv.OpenSession(context.Background(), holder.req.Session())
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}

	// The first waiter, at the head of the queue.
	first := newLimitRun(t, fakeagent.Script{Answer: "admitted"}, invoker.Options{Budget: budget})
	queued := make(chan struct{})
	var once sync.Once
	var firstStarted time.Time
	first.req.OnEvent = func(ev invoker.Event) {
		switch ev.Kind {
		case invoker.KindQueued:
			once.Do(func() { close(queued) })
		case invoker.KindSession:
			firstStarted = time.Now()
		}
	}
	var wg sync.WaitGroup
	var firstRes *invoker.Result
	var firstErr error
	wg.Go(func() { firstRes, firstErr = first.inv.Invoke(context.Background(), first.req) })
	<-queued

	// The second waiter gives up once it is told it waits.
	second := newLimitRun(t, fakeagent.Script{}, invoker.Options{Budget: budget})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ahead int
	second.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindQueued {
			ahead = ev.Ahead
			cancel()
		}
	}
	res, err := second.inv.Invoke(ctx, second.req)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "queued for") || !strings.Contains(err.Error(), "1 ahead; nothing was started") {
		t.Errorf("Invoke() error = %v, want context.Canceled, saying it was queued with 1 ahead", err)
	}
	if ahead != 1 || res.Containment != "" || res.ExitCode != -1 || res.Queued <= 0 || res.Resources != (invoker.Resources{}) {
		t.Errorf("cancelled while waiting: Ahead %d, Result %+v; want 1 ahead, nothing started, the wait in Queued", ahead, res)
	}
	if rec, _ := fakeagent.ReadRecord(second.script.RecordDir); rec != nil && len(rec.Procs) > 0 {
		t.Errorf("the cancelled run's CLI ran: %v", rec.Procs)
	}

	closing := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if firstErr != nil || firstRes.Text != "admitted" || firstRes.Queued <= 0 {
		t.Errorf("the waiter after Close: %v, %+v; want its answer and its wait", firstErr, firstRes)
	}
	if firstStarted.Before(closing) {
		t.Errorf("a run started at %v, before the session that held the whole budget was closed at %v", firstStarted, closing)
	}
}

// With WaitRateLimits, a run that fails rate limited with a reset time
// holds back the backend's next runs until then: they wait at the gate,
// told when it opens, and start after it.
func TestAdmissionRateLimitGate(t *testing.T) {
	budget := &invoker.Budget{WaitRateLimits: true}
	// The reset is far enough ahead for the limited run to end before it
	// on a loaded machine (a race run under load took 1.8 s).
	resets := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	limited := newLimitRun(t, fakeagent.Script{Fail: "API Error: 429 rate_limit_error", RateLimitedUntil: resets, SessionID: "sess-429"},
		invoker.Options{Budget: budget})
	_, err := limited.inv.Invoke(context.Background(), limited.req)
	var le *invoker.LimitError
	if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) || le.ResetsAt.Sub(resets).Abs() > time.Second {
		t.Fatalf("Invoke() error = %v, want a *LimitError for the rate limit resetting at %v", err, resets)
	}
	resets = le.ResetsAt // as the CLI said it (in seconds)

	next := newLimitRun(t, fakeagent.Script{Answer: "after the reset"}, invoker.Options{Budget: budget})
	var evs evlog
	next.req.OnEvent = evs.on
	res, err := next.inv.Invoke(context.Background(), next.req)
	if err != nil || res.Text != "after the reset" {
		t.Fatalf("the next run: %v, %+v", err, res)
	}
	q, _, ok := evs.first(invoker.KindQueued, "at the rate limit of claude")
	if !ok || q.RateLimit == nil || !q.RateLimit.ResetsAt.Equal(resets) {
		t.Errorf("KindQueued event %+v, want one at the gate, with the reset time %v", q, resets)
	}
	_, started, _ := evs.first(invoker.KindSession, "")
	if started.Before(resets) || res.Queued <= 0 {
		t.Errorf("the next run started at %v (queued %v), want after the reset at %v", started, res.Queued, resets)
	}
}

// A Budget's wait shows in Result.Queued, not in Duration; a run admitted
// at once waits for nothing.
func TestAdmissionNoWait(t *testing.T) {
	r := newLimitRun(t, fakeagent.Script{}, invoker.Options{Budget: &invoker.Budget{Runs: 4}})
	var evs evlog
	r.req.OnEvent = evs.on
	res, err := r.inv.Invoke(context.Background(), r.req)
	if err != nil || res.Queued != 0 || evs.count(invoker.KindQueued) != 0 {
		t.Errorf("Invoke: %v, Queued %v, %d KindQueued events; want no wait", err, res.Queued, evs.count(invoker.KindQueued))
	}
}

// A run of Invoke carried by a session of one turn (a run with Approve)
// waits for the Budget as a one-shot run does: its KindQueued events go to
// its OnEvent, and its Result says how long it waited.
func TestAdmissionRoutedRun(t *testing.T) {
	budget := &invoker.Budget{Runs: 1}
	holder := newLimitRun(t, fakeagent.Script{}, invoker.Options{Budget: budget})
	s, err := holder.inv.OpenSession(context.Background(), holder.req.Session())
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	r := newLimitRun(t, fakeagent.Script{Answer: "routed"}, invoker.Options{Budget: budget})
	r.req.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
	queued := make(chan struct{})
	var once sync.Once
	r.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindQueued {
			once.Do(func() { close(queued) })
		}
	}
	var res *invoker.Result
	done := make(chan error, 1)
	go func() {
		var err error
		res, err = r.inv.Invoke(context.Background(), r.req)
		done <- err
	}()
	<-queued
	s.Close()
	if err := <-done; err != nil || res.Text != "routed" || res.Queued <= 0 || res.Resources.CPUTime <= 0 {
		t.Errorf("Invoke: %v, %+v; want the answer, the wait and the run's resources", err, res)
	}
}
