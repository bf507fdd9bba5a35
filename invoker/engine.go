package invoker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// New returns an Invoker that runs the CLI described by b on the shared
// engine. Backend packages call it from their own New with the user's
// options; users of the library call the backend's New instead.
func New(b Backend, opts ...Option) Invoker {
	return &engine{b: b, cfg: newConfig(opts)}
}

// engine runs one Backend. It holds only configuration: every call to
// Invoke keeps its state in its own run value.
type engine struct {
	b   Backend
	cfg config
}

func (e *engine) Name() string { return e.b.Name() }

// Capabilities returns what the backend declares; it makes every engine a
// CapabilityReporter.
func (e *engine) Capabilities() Capabilities { return e.b.Capabilities() }

func (e *engine) Invoke(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	res := &Result{ExitCode: -1}
	fail := func(err error) (*Result, error) {
		res.Duration = time.Since(start)
		return res, &Error{CLI: e.b.Name(), Err: err}
	}
	if err := validate(&req); err != nil {
		return fail(err)
	}
	schema, err := compileSchema(&req)
	if err != nil {
		return fail(err)
	}
	if err := checkCapabilities(e.b, &req); err != nil {
		return fail(err)
	}
	cmd, err := e.b.Command(&req)
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return fail(err)
	}
	if cmd.Cleanup != nil {
		defer cmd.Cleanup() // after the tree is reaped, or when nothing starts
	}
	if err := validateImages(&req); err != nil {
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
	r := &run{e: e, ctx: ctx, req: &req, cmd: cmd, path: path, start: start, res: res, schema: schema}
	err = r.execute()
	res.Duration = time.Since(start)
	if r.panicked.Load() {
		// The tree is reaped; hand the caller's panic (or Goexit, as from
		// t.FailNow in OnEvent) back to the goroutine that called Invoke.
		if r.goexit {
			runtime.Goexit()
		}
		panic(r.panicVal)
	}
	if err != nil {
		return res, &Error{CLI: e.b.Name(), Err: err}
	}
	return res, nil
}
