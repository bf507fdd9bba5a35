package invoker

import "context"

// New returns an Invoker that runs the CLI described by b on the shared
// engine. Backend packages call it from their own New; opts are the
// user's options.
func New(b Backend, opts ...Option) Invoker {
	return &engine{b: b, cfg: newConfig(opts)}
}

type engine struct {
	b   Backend
	cfg config
}

func (e *engine) Name() string { return e.b.Name() }

func (e *engine) Invoke(ctx context.Context, req Request) (*Result, error) {
	panic("not implemented yet")
}
