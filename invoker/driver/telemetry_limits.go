package driver

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/invoker"
)

// Telemetry of limits, accounting and admission: the resources a run used
// (span attributes, histograms per run), the limit that ended it, and its
// wait for the Budget (span events, a histogram of the waits and a gauge
// of the runs waiting).

// Attribute keys of the resources and the waits.
const (
	keyMemoryPeak    = attribute.Key("clinvoke.memory.peak")
	keyCPUTime       = attribute.Key("clinvoke.cpu.time")
	keyProcessesPeak = attribute.Key("clinvoke.processes.peak")
	keySampled       = attribute.Key("clinvoke.resources.sampled")
	keyLimitResource = attribute.Key("clinvoke.limit.resource")
	keyLimitMax      = attribute.Key("clinvoke.limit.max")
	// The keys of the waits are internal/admit's, shared with the waits
	// in mcpadapter's queues.
	keyQueue    = admit.KeyQueue
	keyAdmitted = admit.KeyAdmitted
)

// Bucket boundaries: memory in bytes (1 MiB to 64 GiB), CPU time in
// seconds.
var (
	memoryBuckets = []float64{1 << 20, 4 << 20, 16 << 20, 64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30, 16 << 30, 64 << 30}
	cpuBuckets    = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1200, 3600}
)

// resourceInstruments are the metrics of the resources and the waits.
type resourceInstruments struct {
	memory metric.Int64Histogram
	cpu    metric.Float64Histogram
	conns  metric.Int64Counter
	lost   metric.Int64Counter
	admit.Instruments
}

func newResourceInstruments(m metric.Meter) resourceInstruments {
	var r resourceInstruments
	r.memory, _ = m.Int64Histogram("clinvoke.run.memory.peak", metric.WithUnit("By"),
		metric.WithDescription("Peak memory of a run's process tree (Invoke, or a session's whole life), as Result.Resources.PeakMemory."),
		metric.WithExplicitBucketBoundaries(memoryBuckets...))
	r.cpu, _ = m.Float64Histogram("clinvoke.run.cpu.time", metric.WithUnit("s"),
		metric.WithDescription("CPU time of a run's process tree (Invoke, or a session's whole life), as Result.Resources.CPUTime."),
		metric.WithExplicitBucketBoundaries(cpuBuckets...))
	r.conns, _ = m.Int64Counter("clinvoke.net.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections a sandboxed run's processes attempted under Sandbox.Network, by clinvoke.net.allowed, as Result.Connections."))
	r.lost, _ = m.Int64Counter("clinvoke.net.lost", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections and datagrams a sandboxed run's processes sent around the proxy under Sandbox.Network, refused, that a burst kept from being recorded: not in Result.Connections, counted by a warning."))
	r.Instruments = admit.NewInstruments(m)
	return r
}

// resources records what a run, turn or session used on its span, and for
// a run of Invoke or a session's whole life in the histograms; err is how
// it ended, whose limit (ErrResourceLimit) is named.
func (s *span) resources(ctx context.Context, res *invoker.Result, err error) {
	r := res.Resources
	measured := r != invoker.Resources{}
	if measured && s.mode != modeTurn {
		s.t.res.memory.Record(ctx, r.PeakMemory, s.t.cliOpt.rec...)
		s.t.res.cpu.Record(ctx, r.CPUTime.Seconds(), s.t.cliOpt.rec...)
	}
	s.connections(ctx, res.Connections)
	if !s.rec {
		return
	}
	if measured {
		s.sp.SetAttributes(keyMemoryPeak.Int64(r.PeakMemory), keyCPUTime.Float64(r.CPUTime.Seconds()),
			keyProcessesPeak.Int(r.PeakProcesses), keySampled.Bool(r.Sampled))
	}
	var le *invoker.LimitError
	if errors.As(err, &le) && le.Limit == invoker.ErrResourceLimit {
		s.sp.SetAttributes(keyLimitResource.String(le.Resource))
		if le.Max > 0 {
			s.sp.SetAttributes(keyLimitMax.Int64(le.Max))
		}
	}
}

// waiting counts a run that starts (n = 1) or stops (-1) waiting for the
// Budget.
func (s *span) waiting(n int64) {
	if s == nil {
		return
	}
	s.t.res.Waiting.Add(context.Background(), n, waitOpts(s.t).add...)
}

// queued records where a waiting run stands: the span event
// clinvoke.queued, at the start of the wait and at each change.
func (s *span) queued(w admit.Wait) {
	if s == nil || !s.rec {
		return
	}
	s.event(admit.EventQueued, admit.QueuedAttrs(admit.QueueBudget, w)...)
}

// admitted records the end of a run's admission: the span event
// clinvoke.admitted after a wait (admitted or given up), and the
// histogram of the waits, zero ones included.
func (s *span) admitted(waited time.Duration, ok bool) {
	if s == nil {
		return
	}
	s.t.res.Queued.Record(context.Background(), waited.Seconds(), admittedOpts(s.t, ok).rec...)
	if s.rec && waited > 0 {
		s.event(admit.EventAdmitted, admit.AdmittedAttrs(admit.QueueBudget, waited, ok)...)
	}
}

// admittedOpts are the attribute sets of clinvoke.run.queued, made once.
func admittedOpts(t *telemetry, ok bool) mopts {
	makeAdmitOpts(t)
	if ok {
		return t.admitOpt[1]
	}
	return t.admitOpt[0]
}

// waitOpts is the attribute set of clinvoke.runs.waiting, made once.
func waitOpts(t *telemetry) mopts {
	makeAdmitOpts(t)
	return t.waitOpt
}

// makeAdmitOpts makes the attribute sets of the waits for the Budget.
func makeAdmitOpts(t *telemetry) {
	t.admitOnce.Do(func() {
		c, q := keyCLI.String(t.cli), keyQueue.String(admit.QueueBudget)
		t.admitOpt[0] = newMopts(c, q, keyAdmitted.Bool(false))
		t.admitOpt[1] = newMopts(c, q, keyAdmitted.Bool(true))
		t.waitOpt = newMopts(c, q)
	})
}
