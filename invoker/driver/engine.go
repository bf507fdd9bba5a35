package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// New returns an Invoker that runs the CLI described by b on the shared
// engine, configured by opts (see invoker.Options). Backend packages call
// it from their own New with the user's options; users of the library call
// the backend's New instead.
func New(b Backend, opts ...invoker.Options) invoker.Invoker {
	e := &engine{b: b, cfg: newConfig(opts)}
	e.cfg.tel.bind(b.Name())
	return e
}

// engine runs one Backend. It holds only configuration: every call to
// Invoke or OpenSession keeps its state in its own run value.
type engine struct {
	b     Backend
	cfg   config
	probe probe
}

func (e *engine) Name() string { return e.b.Name() }

// Capabilities returns what the backend declares, with the containment
// level this engine's runs get on this machine.
func (e *engine) Capabilities() invoker.Capabilities {
	c := e.b.Capabilities()
	c.Containment, c.ContainmentNote = e.probe.get(&e.cfg)
	return c
}

// invoke runs one turn for Invoke, recording in sp.
func (e *engine) invoke(ctx context.Context, req invoker.Request, sp *span) (*invoker.Result, error) {
	start := time.Now()
	res := &invoker.Result{ExitCode: -1}
	fail := func(err error) (*invoker.Result, error) {
		res.Duration = time.Since(start)
		return res, &cliError{CLI: e.b.Name(), Err: err}
	}
	// A run is a session of one turn: its settings and its turn are
	// checked as OpenSession and Session.Turn check theirs.
	sreq, turn := req.Session(), req.Turn()
	schema, err := e.checkSession(&sreq)
	if err != nil {
		return fail(err)
	}
	if err := checkTurn(&turn); err != nil {
		return fail(err)
	}
	if err := e.checkSupported(&req); err != nil {
		return fail(err)
	}
	if e.inSession(&req) {
		// Checked here as Session.Turn checks them, before the session
		// that would carry the turn starts.
		if err := validateImages(turn.Images); err != nil {
			return fail(err)
		}
		return e.invokeInSession(ctx, req, start)
	}
	cmd, err := e.b.Command(&req)
	if err != nil {
		if !errors.Is(err, invoker.ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return fail(err)
	}
	if cmd.Cleanup != nil {
		defer cmd.Cleanup() // after the tree is reaped, or when nothing starts
	}
	if err := validateImages(turn.Images); err != nil {
		return fail(err)
	}
	path, err := e.lookPath()
	if err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		// Never start a process for a call already cancelled; report it
		// as a cancel during the call is reported.
		return fail(ctxError(ctx))
	}
	r := &run{
		cli: e.b.Name(), cfg: &e.cfg, ctx: ctx, workdir: req.Workdir, env: req.Env, cmd: cmd, path: path,
		start: start, res: res, schema: schema,
		dec: e.b.NewDecoder(&req), onEvent: req.OnEvent, deltas: req.Deltas, tel: sp,
	}
	if cmd.Stdin != "" {
		r.input = r.writePrompt
	}
	err = r.execute()
	res.Duration = time.Since(start)
	r.reraise()
	if err != nil {
		return res, &cliError{CLI: e.b.Name(), Err: err}
	}
	return res, nil
}

// inSession reports whether Invoke runs req as a session of one turn:
// when it asks for two-way control (Approve, MCPServers), which only the
// long-lived modes carry, or when the backend says its one-shot mode
// cannot honour it (SessionRouter).
func (e *engine) inSession(req *invoker.Request) bool {
	if !e.b.Capabilities().Sessions {
		return false
	}
	if req.Approve != nil || len(req.MCPServers) > 0 {
		return true
	}
	sr, ok := e.b.(SessionRouter)
	return ok && sr.InSession(req)
}

// invokeInSession runs req as a session of one turn, for a request the
// backend's one-shot mode cannot honour (SessionRouter). Close is deferred
// so that the tree is gone before Invoke returns or re-raises a panic of
// OnEvent.
func (e *engine) invokeInSession(ctx context.Context, req invoker.Request, start time.Time) (res *invoker.Result, err error) {
	s, err := e.open(ctx, req.Session(), true)
	if err != nil {
		res := &invoker.Result{ExitCode: -1, Duration: time.Since(start)}
		if s != nil { // started, and ended in the opening: say how
			<-s.done
			res.ExitCode, res.Stderr, res.Containment = s.r.res.ExitCode, s.r.tail.String(), s.r.res.Containment
		}
		return res, err
	}
	returning := false // the turn returned rather than re-raised a panic
	defer func() {
		cerr := s.Close()
		if returning && s.r.panicked.Load() {
			// A callback of the caller's panicked after the turn (a
			// tool handler still running): re-raise it as Invoke does.
			s.r.reraise()
		}
		if err == nil && cerr != nil {
			err = cerr
		}
		if res != nil {
			if err != nil {
				// A failed or cancelled run reports the CLI's own exit
				// status, as a one-shot run does (-1 when the ladder
				// killed it), not a turn's 0 while the CLI ran on.
				res.ExitCode = s.r.res.ExitCode
			}
			res.Duration = time.Since(start)
		}
	}()
	res, err = s.turn(ctx, req.Turn())
	returning = true
	return res, err
}
