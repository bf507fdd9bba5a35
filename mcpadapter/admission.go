package mcpadapter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/invoker"
)

// Admission of a call. A call waits, in this order, for a slot of its
// identity (Options.MaxConcurrentPerIdentity), then for a slot of the
// server (Options.MaxConcurrent), then its run waits for the host's Budget
// (invoker.Options.Budget) in the invoker. All three are queues of
// internal/admit, first come first served, and a call waits in one at a
// time, holding nothing of the next. Every wait is told the same way: as
// the run's KindQueued event, "queued, N ahead" and what for, in the
// call's progress; and the time waited in all of them is the call's
// queued_ms.

// slots bounds the runs executing at once, for the server
// (Options.MaxConcurrent) and for each identity
// (Options.MaxConcurrentPerIdentity): one admit.Queue each, an identity's
// dropped once it has no run executing or waiting.
type slots struct {
	server      *admit.Queue // nil: no limit
	serverLimit int64
	perIdentity int64 // 0: no limit

	mu  sync.Mutex
	ids map[string]*idQueue
}

type idQueue struct {
	q    *admit.Queue
	refs int // runs holding or waiting for a slot
}

func newSlots(server, perIdentity int64) *slots {
	s := &slots{serverLimit: server, perIdentity: perIdentity}
	if server < 1<<31 {
		s.server = admit.New(admit.Amounts{Runs: server})
	}
	return s
}

// acquire waits for a slot of identity, then one of the server, telling
// queued where the call stands while it waits, until ctx is done. It
// returns the function that frees both, and how long the call waited; on
// error nothing is held, and the error says which slot it waited for.
func (s *slots) acquire(ctx context.Context, identity string, queued func(invoker.Event)) (release func(), waited time.Duration, err error) {
	start := time.Now()
	idRelease := func() {}
	if s.perIdentity > 0 && identity != "" {
		s.mu.Lock()
		if s.ids == nil {
			s.ids = map[string]*idQueue{}
		}
		iq := s.ids[identity]
		if iq == nil {
			iq = &idQueue{q: admit.New(admit.Amounts{Runs: s.perIdentity})}
			s.ids[identity] = iq
		}
		iq.refs++
		s.mu.Unlock()
		drop := func() {
			s.mu.Lock()
			if iq.refs--; iq.refs == 0 {
				delete(s.ids, identity)
			}
			s.mu.Unlock()
		}
		what := fmt.Sprintf("for one of the %d %s of %s at once", s.perIdentity, plural(s.perIdentity, "run"), identity)
		g, err := iq.q.Acquire(ctx, admit.Request{Need: admit.Amounts{Runs: 1}, OnWait: waitReporter(queued, what)})
		if err != nil {
			drop()
			return nil, time.Since(start), fmt.Errorf("not started, still waiting for a free slot of this client: %w", ctx.Err())
		}
		idRelease = func() {
			g.Release()
			drop()
		}
	}
	what := fmt.Sprintf("for one of this server's %d %s at once", s.serverLimit, plural(s.serverLimit, "run"))
	g, err := s.server.Acquire(ctx, admit.Request{Need: admit.Amounts{Runs: 1}, OnWait: waitReporter(queued, what)})
	if err != nil {
		idRelease()
		return nil, time.Since(start), fmt.Errorf("not started, still waiting for a free slot: %w", ctx.Err())
	}
	return func() {
		g.Release()
		idRelease()
	}, time.Since(start), nil
}

// waitReporter returns the OnWait of a wait for what: the KindQueued
// event a run waiting for the Budget gets, with what it waits for.
func waitReporter(queued func(invoker.Event), what string) func(admit.Wait) {
	return func(w admit.Wait) {
		queued(invoker.Event{Kind: invoker.KindQueued, Ahead: w.Ahead, Text: queuedText(w.Ahead, time.Time{}, what)})
	}
}

// queuedText is the one message of a wait: "queued, 3 ahead", then until
// when for a rate limit's gate, then what for when it is not the host's
// Budget.
func queuedText(ahead int, until time.Time, what string) string {
	s := fmt.Sprintf("queued, %d ahead", ahead)
	if !until.IsZero() {
		s += ", until the rate limit resets at " + until.UTC().Format(time.RFC3339)
	}
	if what != "" {
		s += " " + what
	}
	return s
}

func plural(n int64, one string) string {
	if n == 1 {
		return one
	}
	return one + "s"
}
