package driver

import "github.com/clinvoke/clinvoke/invoker"

// WithoutCancelledSweep returns an Invoker like inv, an Invoker of this
// package, whose sessions do not sweep cancelled turns: the baseline of
// the benchmark that measures what the sweep costs.
func WithoutCancelledSweep(inv invoker.Invoker) invoker.Invoker {
	e := inv.(*engine)
	n := &engine{b: e.b, cfg: e.cfg}
	n.cfg.keepCancelled = true
	return n
}
