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
	e.sessions, _ = b.(SessionBackend)
	e.steerer, _ = b.(Steerer)
	e.router, _ = b.(SessionRouter)
	e.inBand, _ = b.(InBandMCP)
	e.cfg.cli = b.Name()
	e.cfg.tel.bind(b.Name())
	return e
}

// engine runs one Backend: what an Invoker of this package is. It holds
// only configuration: every call to Invoke or OpenSession keeps its state
// in its own run, turn and session values.
type engine struct {
	b Backend
	// The backend's optional interfaces, found once: a capability of the
	// backend's that is not a Request field is an interface it has or
	// has not (as database/sql finds a driver's), never also a flag.
	sessions SessionBackend // nil without a long-lived mode
	steerer  Steerer        // nil when a turn takes no message
	router   SessionRouter  // nil when Invoke routes only two-way control to a session
	inBand   InBandMCP      // nil when Go MCP servers are served over HTTP
	cfg      config
	probe    probe
	limits   limitsProbe
}

func (e *engine) Name() string { return e.b.Name() }

// Capabilities returns what the backend declares, with the containment
// level this engine's runs get on this machine and the limits it can
// enforce on them.
func (e *engine) Capabilities() invoker.Capabilities {
	c := e.declared()
	c.Containment, c.ContainmentNote = e.probe.get(&e.cfg)
	c.Limits, c.LimitsNote = e.limits.capabilities(&e.cfg)
	c.Sandbox, c.SandboxNote = sandboxCapabilities()
	return c
}

// declared returns the backend's declaration of the Request fields its CLI
// honours, with Sessions and Steer as its interfaces say.
func (e *engine) declared() invoker.Capabilities {
	c := e.b.Capabilities()
	c.Sessions, c.Steer = e.sessions != nil, e.steerer != nil
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
