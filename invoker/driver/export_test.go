package driver

import "github.com/clinvoke/clinvoke/invoker"

// NewWithoutTelemetry is New with the engine's telemetry removed, not
// merely no-op: the baseline of BenchmarkTelemetryOverhead.
func NewWithoutTelemetry(b Backend, opts ...invoker.Options) invoker.Invoker {
	e := New(b, opts...).(*engine)
	e.cfg.tel = nil
	return e
}
