package mcpadapter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestAdmissionChainNoDeadlock runs many calls of three identities
// through the whole chain of admission at once (a slot of the identity,
// then of the server, then a share of a Budget of one run, as the invoker
// takes it), some of them cancelled while they wait: every call ends,
// admitted or cancelled, no bound is ever exceeded, and nothing is held
// or waiting afterwards.
func TestAdmissionChainNoDeadlock(t *testing.T) {
	const perIdentity, server, calls = 1, 2, 8
	s := newSlots(server, perIdentity, waitInstruments(noop.NewMeterProvider()))
	budget := admit.New(admit.Amounts{Runs: 1})
	ids := []string{"alice", "bob", "carol"}
	var inServer, inBudget atomic.Int32
	inID := map[string]*atomic.Int32{}
	for _, id := range ids {
		inID[id] = new(atomic.Int32)
	}
	over := func(what string, n, limit int32) {
		if n > limit {
			t.Errorf("%d runs hold %s at once, the limit is %d", n, what, limit)
		}
	}
	var wg sync.WaitGroup
	var admitted, cancelled atomic.Int32
	for i := range calls {
		for _, id := range ids {
			ctx, cancel := context.WithCancel(context.Background())
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cancel()
				if i%3 == 2 { // some give up, wherever they stand
					go cancel()
				}
				release, _, err := s.acquire(ctx, "codex", id, func(invoker.Event) {})
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("acquire() error = %v, want one of a cancelled wait", err)
					}
					cancelled.Add(1)
					return
				}
				defer release()
				over("a slot of "+id, inID[id].Add(1), perIdentity)
				defer inID[id].Add(-1)
				over("a slot of the server", inServer.Add(1), server)
				defer inServer.Add(-1)
				g, err := budget.Acquire(ctx, admit.Request{Need: admit.Amounts{Runs: 1}})
				if err != nil {
					cancelled.Add(1)
					return
				}
				defer g.Release()
				over("the Budget", inBudget.Add(1), 1)
				runtime.Gosched() // the run
				inBudget.Add(-1)
				admitted.Add(1)
			}()
		}
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testenv.Timeout(testenv.Hang)):
		buf := make([]byte, 1<<20)
		t.Fatalf("the calls did not all end: admission is stuck\n%s", buf[:runtime.Stack(buf, true)])
	}
	if n := admitted.Load() + cancelled.Load(); n != calls*int32(len(ids)) || admitted.Load() == 0 {
		t.Errorf("%d calls admitted and %d cancelled, want all %d ended, some admitted", admitted.Load(), cancelled.Load(), calls*len(ids))
	}
	for name, q := range map[string]*admit.Queue{"server": s.server, "budget": budget} {
		if st := q.Stats(); st.Holders != 0 || st.Waiting != 0 {
			t.Errorf("%s queue after the calls: %d holders, %d waiting; want none", name, st.Holders, st.Waiting)
		}
	}
	if len(s.ids) != 0 {
		t.Errorf("identity queues left after the calls: %v", fmt.Sprint(s.ids))
	}
}
