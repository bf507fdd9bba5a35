package driver

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/clinvoke/clinvoke/invoker"
)

// Invoke runs one turn (see invoke) inside its span: the span starts
// before the request is checked, so that a rejected request is counted
// too, and ends when the tree is reaped, also when OnEvent panicked.
func (e *engine) Invoke(ctx context.Context, req invoker.Request) (res *invoker.Result, err error) {
	sreq := req.Session()
	ctx, sp := e.cfg.tel.begin(ctx, modeInvoke, e.b.Name(), &sreq)
	req.OnEvent = sp.observe(req.OnEvent)
	returned := false
	defer func() { sp.end(res, err, !returned) }()
	res, err = e.invoke(ctx, req, sp)
	returned = true
	return res, err
}

// turnInterrupted records, on the turn's span (the span in the turn's
// context, which Turn made), that the turn was asked to end in the CLI's
// protocol, and why.
func (t *telemetry) turnInterrupted(ctx context.Context, why error) {
	if t == nil {
		return
	}
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.AddEvent(stepInterrupt, trace.WithAttributes(keyReason.String(outcome(why, false)), attribute.String("clinvoke.interrupt.via", "protocol")))
	}
}

// Turn runs one turn of the session (see turn) inside its span: a child
// of the span in ctx (the caller's, for an MCP call the client's), linked
// to the session's span, which holds the process's start, ladder and
// sweep.
func (s *session) Turn(ctx context.Context, t invoker.TurnRequest) (res *invoker.Result, err error) {
	sreq := s.sreq
	sreq.SessionID = s.ID()
	ctx, sp := s.cfg.tel.begin(ctx, modeTurn, s.cli, &sreq, s.r.tel.link())
	t.OnEvent = sp.observe(t.OnEvent)
	returned := false
	defer func() { sp.end(res, err, !returned) }()
	res, err = s.turn(ctx, t)
	returned = true
	return res, err
}
