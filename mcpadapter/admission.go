package mcpadapter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

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
// call's progress; counted in the same metrics and span events
// (internal/admit's Instruments, told apart by clinvoke.queue); and the
// time waited in all of them is the call's queued_ms.
//
// Why a chain and not one request granted atomically: the Budget's share
// is the invoker's to decide, at Invoke or OpenSession. What a run
// promises (its memory limit, from invoker.Options.Limits and
// Request.Limits), the rate-limit gate it waits at, and whether it needs a
// share at all (a turn of a warm session takes none: its session holds
// one until closed) are known there only; and the Budget is shared by
// every Invoker of the process, those outside any MCP server included.
//
// Why it cannot deadlock: every call waits in the same order (identity,
// server, Budget) and never for a queue before one it holds; a holder of
// a Budget share waits for no queue at all (a run until its tree is
// reaped, a warm session until it is closed: at the latest after
// WarmSessions.IdleTimeout, or at Shutdown). So every wait is for holders
// that are further along the chain, the last of which end on their own;
// TestAdmissionChainNoDeadlock drives the chain with cancels. Holding
// the identity's and the server's slots while waiting for the Budget is
// what they bound: the calls this server has admitted, running or about
// to run.

// slots bounds the runs executing at once, for the server
// (Options.MaxConcurrent) and for each identity
// (Options.MaxConcurrentPerIdentity): one admit.Queue each, an identity's
// dropped once it has no run executing or waiting.
type slots struct {
	ins         admit.Instruments
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

func newSlots(server, perIdentity int64, ins admit.Instruments) *slots {
	s := &slots{ins: ins, serverLimit: server, perIdentity: perIdentity}
	if server < 1<<31 {
		s.server = admit.New(admit.Amounts{Runs: server})
	}
	return s
}

// acquire waits for a slot of identity, then one of the server, telling
// queued where the call stands while it waits, until ctx is done; the
// waits are counted in the metrics of the waits, for cli, and are events
// of ctx's span (the call's). It returns the function that frees both,
// and how long the call waited; on error nothing is held, and the error
// says which slot it waited for.
func (s *slots) acquire(ctx context.Context, cli, identity string, queued func(invoker.Event)) (release func(), waited time.Duration, err error) {
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
		g, w, err := s.wait(ctx, iq.q, admit.QueueIdentity, cli, what, queued)
		waited += w
		if err != nil {
			drop()
			return nil, waited, fmt.Errorf("not started, still waiting for a free slot of this client: %w", ctx.Err())
		}
		idRelease = func() {
			g.Release()
			drop()
		}
	}
	what := fmt.Sprintf("for one of this server's %d %s at once", s.serverLimit, plural(s.serverLimit, "run"))
	g, w, err := s.wait(ctx, s.server, admit.QueueServer, cli, what, queued)
	waited += w
	if err != nil {
		idRelease()
		return nil, waited, fmt.Errorf("not started, still waiting for a free slot: %w", ctx.Err())
	}
	return func() {
		g.Release()
		idRelease()
	}, waited, nil
}

// wait waits for one slot of q (a nil q admits at once), the queue named
// queue, as the invoker waits for the host's Budget: the KindQueued event
// to queued with what it waits for, the span events clinvoke.queued and
// clinvoke.admitted on ctx's span, the gauge of the runs waiting while it
// waits and the histogram of the waits when it ends, for cli.
func (s *slots) wait(ctx context.Context, q *admit.Queue, queue, cli, what string, queued func(invoker.Event)) (*admit.Grant, time.Duration, error) {
	if q == nil {
		return nil, 0, nil
	}
	sp := trace.SpanFromContext(ctx)
	set := attribute.NewSet(attribute.String("clinvoke.cli", cli), admit.KeyQueue.String(queue))
	waiting := false
	req := admit.Request{Need: admit.Amounts{Runs: 1}, OnWait: func(w admit.Wait) {
		if !waiting {
			waiting = true
			s.ins.Waiting.Add(ctx, 1, metric.WithAttributeSet(set))
		}
		sp.AddEvent(admit.EventQueued, trace.WithAttributes(admit.QueuedAttrs(queue, w)...))
		queued(invoker.Event{Kind: invoker.KindQueued, Ahead: w.Ahead, Text: queuedText(w.Ahead, time.Time{}, what)})
	}}
	g, err := q.Acquire(ctx, req)
	if waiting {
		s.ins.Waiting.Add(ctx, -1, metric.WithAttributeSet(set))
	}
	var waited time.Duration
	var we *admit.WaitError
	switch {
	case errors.As(err, &we):
		waited = we.Waited
	case err == nil:
		waited = g.Waited()
	}
	// The context may be done: the wait is recorded all the same.
	mctx := context.WithoutCancel(ctx)
	s.ins.Queued.Record(mctx, waited.Seconds(), metric.WithAttributeSet(set),
		metric.WithAttributes(admit.KeyAdmitted.Bool(err == nil)))
	if waited > 0 {
		sp.AddEvent(admit.EventAdmitted, trace.WithAttributes(admit.AdmittedAttrs(queue, waited, err == nil)...))
	}
	return g, waited, err
}

// waitInstruments makes the metrics of the waits with mp's meter, or the
// global provider's when mp is nil.
func waitInstruments(mp metric.MeterProvider) admit.Instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return admit.NewInstruments(mp.Meter(traceScope))
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
