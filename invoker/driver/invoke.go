package driver

import (
	"context"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// Invoke runs one turn inside its span: the span starts before the request
// is checked, so that a rejected request is counted too, and ends when the
// tree is reaped, also when OnEvent panicked.
func (e *engine) Invoke(ctx context.Context, req invoker.Request) (res *invoker.Result, err error) {
	sreq := req.Session()
	ctx, sp := e.cfg.tel.begin(ctx, modeInvoke, e.b.Name(), &sreq)
	req.OnEvent = sp.observe(req.OnEvent)
	returned := false
	defer func() { sp.end(res, err, !returned) }()
	res, err = e.invoke(ctx, req, sp)
	returned = true
	if err != nil {
		err = e.named(err)
	}
	return res, err
}

// invoke runs req as one turn: checked once, as a whole, then carried by a
// one-shot run (the prompt on standard input, the turn's end the CLI's
// exit), or by a session of one turn for a request only the long-lived
// mode honours (see routed). The error is not yet named with the CLI.
func (e *engine) invoke(ctx context.Context, req invoker.Request, sp *span) (*invoker.Result, error) {
	t := newTurn(&e.cfg, req.Turn(), req.Deltas, nil)
	c, err := e.checkRequest(&req)
	if err != nil {
		t.res.Duration = time.Since(t.start)
		return t.res, err
	}
	t.schema = c.schema
	if e.routed(&req) {
		// Checked here as Session.Turn checks them, before the session
		// that would carry the turn starts.
		if err := validateImages(req.Images); err != nil {
			t.res.Duration = time.Since(t.start)
			return t.res, err
		}
		return e.invokeInSession(ctx, req, c, t.start)
	}
	if err := e.startOneShot(ctx, &req, c.sandbox, t, sp); err != nil {
		t.res.Duration = t.elapsed()
		return t.res, err
	}
	return t.run(ctx)
}

// routed reports whether Invoke runs req as a session of one turn: when it
// asks for two-way control (Approve, MCPServers), which only the
// long-lived modes carry, or when the backend says its one-shot mode
// cannot honour it (SessionRouter).
func (e *engine) routed(req *invoker.Request) bool {
	if e.sessions == nil {
		return false
	}
	if req.Approve != nil || len(req.MCPServers) > 0 {
		return true
	}
	return e.router != nil && e.router.InSession(req)
}

// invokeInSession runs req, checked, as the one turn of a session. Close
// is deferred so that the tree is gone before Invoke returns or re-raises
// a panic of a callback.
func (e *engine) invokeInSession(ctx context.Context, req invoker.Request, c checked, start time.Time) (res *invoker.Result, err error) {
	s, queued, err := e.open(ctx, req.Session(), c, true, req.OnEvent)
	if err != nil {
		res := &invoker.Result{ExitCode: -1, Queued: queued, Duration: time.Since(start) - queued}
		if s != nil { // started, and ended in the opening: say how
			end := s.r.end()
			res.ExitCode, res.Stderr, res.Containment, res.Sandbox = end.state.Code, end.stderr, s.r.level(), s.r.sbx.held()
			res.Resources = resources(end.usage)
			res.Connections = s.r.sbx.netRules().connections(0)
			s.r.logWarnings() // no turn to carry them
		}
		return res, err
	}
	returning := false // the turn returned rather than re-raised a panic
	defer func() {
		cerr := s.close()
		if returning && req.OnEvent != nil && !s.cb.failed() {
			// What the run did after the turn's end, until the CLI
			// exited (a connection it tried at exit, a settings file it
			// wrote), as a one-shot run's turn delivers it.
			for _, ev := range s.r.warnings(nil) {
				if !s.cb.call("OnEvent", func() { req.OnEvent(ev) }) {
					break
				}
			}
		}
		s.r.logWarnings() // what no callback could be told of
		if returning && s.cb.failed() {
			// A callback of the caller's panicked after the turn (a tool
			// handler still running): re-raise it as Invoke does.
			s.cb.reraise()
		}
		if !returning {
			return // the panic goes on
		}
		if err == nil && cerr != nil {
			err = cerr
		}
		end := s.r.end()
		if err != nil {
			// A failed or cancelled run reports the CLI's own exit
			// status, as a one-shot run does (-1 when the ladder killed
			// it), not a turn's 0 while the CLI ran on.
			res.ExitCode = end.state.Code
		}
		// The tail of the whole run, once its stderr has been read to
		// its end, as a one-shot run reports it: at the end of the turn,
		// the stderr reader may not have caught up with what the CLI
		// wrote.
		res.Stderr = end.stderr
		// What the whole run used, as a one-shot run reports it.
		res.Resources = resources(end.usage)
		// Every connection of the whole run, the opening's included.
		res.Connections = s.r.sbx.netRules().connections(0)
		res.Queued = queued
		res.Duration = time.Since(start) - queued
	}()
	res, err = s.turn(ctx, req.Turn(), false)
	returning = true
	return res, err
}
