package driver

import "github.com/clinvoke/clinvoke/invoker"

// NewWithoutTelemetry is New with the engine's telemetry removed, not
// merely no-op: the baseline of BenchmarkTelemetryOverhead.
func NewWithoutTelemetry(b Backend, opts ...invoker.Options) invoker.Invoker {
	e := New(b, opts...).(*engine)
	e.cfg.tel = nil
	return e
}

// WithoutCancelledSweep returns an Invoker like inv, an Invoker of this
// package, whose sessions do not sweep cancelled turns: the baseline of
// the benchmark that measures what the sweep costs.
func WithoutCancelledSweep(inv invoker.Invoker) invoker.Invoker {
	return like(inv, func(c *config) { c.keepCancelled = true })
}

// MaxPendingApprovals is the engine's cap on the questions of a turn that
// wait for Approve at once.
const MaxPendingApprovals = maxPendingApprovals

// WithoutAccounting returns an Invoker like inv, an Invoker of this
// package, whose runs are not accounted (proc.Attr.Account off): the
// baseline of the benchmark that measures what accounting costs.
func WithoutAccounting(inv invoker.Invoker) invoker.Invoker {
	return like(inv, func(c *config) { c.account = false })
}

// OnTurnPublished returns an Invoker like inv, an Invoker of this package,
// whose sessions call f when a turn has become the session's current one,
// on the goroutine of its Turn, before Turn goes on.
func OnTurnPublished(inv invoker.Invoker, f func()) invoker.Invoker {
	return like(inv, func(c *config) { c.published = f })
}

// OnSteered returns an Invoker like inv, an Invoker of this package,
// whose sessions' Steer calls f once its lines are queued, before it
// returns.
func OnSteered(inv invoker.Invoker, f func()) invoker.Invoker {
	return like(inv, func(c *config) { c.steered = f })
}

// OnAnswered returns an Invoker like inv, an Invoker of this package,
// whose sessions call f once a decision of Approve is settled and its
// answer queued, on the goroutine that called Approve.
func OnAnswered(inv invoker.Invoker, f func()) invoker.Invoker {
	return like(inv, func(c *config) { c.answered = f })
}

// like returns an Invoker like inv, an Invoker of this package, with its
// configuration changed by set.
func like(inv invoker.Invoker, set func(*config)) invoker.Invoker {
	e := inv.(*engine)
	n := New(e.b).(*engine)
	n.cfg = e.cfg
	set(&n.cfg)
	return n
}

// SetNetProbe makes the network sandbox's probe answer route ("enter",
// "wrap") or err, as on a host that gives a namespace only that way or
// none, until the test ends. The test must not be parallel.
func SetNetProbe(t interface{ Cleanup(func()) }, route string, err error) {
	old := netProbe
	netProbe = func() (string, error) { return route, err }
	t.Cleanup(func() { netProbe = old })
}

// SetLandlockProbe makes the filesystem sandbox's probe answer abi or err,
// as on a host whose kernel gives that Landlock or none, until the test
// ends. The test must not be parallel.
func SetLandlockProbe(t interface{ Cleanup(func()) }, abi int, err error) {
	old := landlockProbe
	landlockProbe = func() (int, error) { return abi, err }
	t.Cleanup(func() { landlockProbe = old })
}
