package mcptest

import (
	"context"
	"sync"

	"github.com/clinvoke/clinvoke/invoker"
)

// An Invoker is an invoker.Invoker that runs another, the one it embeds,
// and lets a test wait for its runs to start: give it to the server under
// test in place of the invoker it wraps, and a test can cancel a call once
// its agent is at work, without sleeping, and without waiting for a
// progress notification (which mcpadapter spaces out by
// Options.ProgressInterval, 2 s by default).
//
// A run starts when its CLI prints its first event: its process is then
// running. The turns of a session (the adapter's warm sessions) count as
// runs. Name and Capabilities are the wrapped invoker's; requests reach it
// unchanged, but for OnEvent, which the Invoker calls first.
//
// An Invoker is safe for concurrent use.
type Invoker struct {
	invoker.Invoker

	mu      sync.Mutex
	started []invoker.Request // the runs started and not yet taken by WaitStart
	wake    chan struct{}     // closed when a run starts; nil while nobody waits
}

var _ invoker.Invoker = (*Invoker)(nil)

// NewInvoker returns an Invoker that runs inv.
func NewInvoker(inv invoker.Invoker) *Invoker {
	return &Invoker{Invoker: inv}
}

// WaitStart waits until a run has started and returns its request, as the
// wrapped invoker received it; for a session's turn, the session's request
// with the turn's prompt (SessionRequest.Request). Each run is returned
// once, in the order the runs started, whether it started before
// WaitStart was called or after. It returns ctx.Err() if ctx is done first.
func (i *Invoker) WaitStart(ctx context.Context) (invoker.Request, error) {
	for {
		i.mu.Lock()
		if len(i.started) > 0 {
			req := i.started[0]
			i.started = i.started[1:]
			i.mu.Unlock()
			return req, nil
		}
		if i.wake == nil {
			i.wake = make(chan struct{})
		}
		wake := i.wake
		i.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return invoker.Request{}, ctx.Err()
		}
	}
}

// Invoke runs req with the wrapped invoker.
func (i *Invoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	req.OnEvent = i.tap(req, req.OnEvent)
	return i.Invoker.Invoke(ctx, req)
}

// OpenSession opens a session of the wrapped invoker, whose turns count as
// runs.
func (i *Invoker) OpenSession(ctx context.Context, req invoker.SessionRequest) (invoker.Session, error) {
	s, err := i.Invoker.OpenSession(ctx, req)
	if s == nil {
		return nil, err
	}
	return &session{Session: s, inv: i, req: req}, err
}

// tap returns the OnEvent of a run of req: it records the run's start at
// its first event, then calls onEvent.
func (i *Invoker) tap(req invoker.Request, onEvent func(invoker.Event)) func(invoker.Event) {
	var once sync.Once
	return func(ev invoker.Event) {
		once.Do(func() { i.start(req) })
		if onEvent != nil {
			onEvent(ev)
		}
	}
}

// start records that a run of req has started.
func (i *Invoker) start(req invoker.Request) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.started = append(i.started, req)
	if i.wake != nil {
		close(i.wake)
		i.wake = nil
	}
}

// A session is a session of the wrapped invoker whose turns count as runs.
type session struct {
	invoker.Session
	inv *Invoker
	req invoker.SessionRequest
}

func (s *session) Turn(ctx context.Context, t invoker.TurnRequest) (*invoker.Result, error) {
	t.OnEvent = s.inv.tap(s.req.Request(t), t.OnEvent)
	return s.Session.Turn(ctx, t)
}
