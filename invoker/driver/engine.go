package driver

import (
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

// named names the CLI in the message of err, an error of a call to the
// Invoker or a Session ("codex: ..."); nil stays nil.
func (e *engine) named(err error) error {
	if err == nil {
		return nil
	}
	return &cliError{CLI: e.b.Name(), Err: err}
}
