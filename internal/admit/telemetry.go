package admit

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Telemetry of the waits, one set for every queue a run waits in (the
// host's Budget in the invoker, an MCP server's slots in mcpadapter): the
// same instruments, span events and attribute keys, told apart by
// KeyQueue.

// Attribute keys of the waits.
const (
	// KeyQueue names the queue waited in: QueueBudget, QueueServer or
	// QueueIdentity.
	KeyQueue = attribute.Key("clinvoke.queue")
	// KeyAhead is the number of requests ahead, on clinvoke.queued.
	KeyAhead = attribute.Key("clinvoke.queue.ahead")
	// KeyGate and KeyGateUntil name the rate-limit gate waited at and
	// when it opens, on clinvoke.queued.
	KeyGate      = attribute.Key("clinvoke.queue.gate")
	KeyGateUntil = attribute.Key("clinvoke.queue.until")
	// KeyWaited is the time waited in seconds, on clinvoke.admitted.
	KeyWaited = attribute.Key("clinvoke.queue.waited")
	// KeyAdmitted says whether the wait ended admitted (or given up), on
	// clinvoke.admitted and the histogram of the waits.
	KeyAdmitted = attribute.Key("clinvoke.queue.admitted")
)

// The values of KeyQueue.
const (
	QueueBudget   = "budget"   // the host's Budget (invoker.Options.Budget)
	QueueServer   = "server"   // an MCP server's slots (mcpadapter's MaxConcurrent)
	QueueIdentity = "identity" // a client's slots (MaxConcurrentPerIdentity)
)

// The names of the span events of a wait.
const (
	EventQueued   = "clinvoke.queued"
	EventAdmitted = "clinvoke.admitted"
)

// queuedBuckets are the bucket boundaries of the waits, in seconds.
var queuedBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Instruments are the metrics of the waits: a histogram of the time each
// wait took (zero ones included) and a gauge of the runs waiting now.
type Instruments struct {
	Queued  metric.Float64Histogram
	Waiting metric.Int64UpDownCounter
}

// NewInstruments makes the metrics of the waits with m: every meter that
// records them makes them here, so that they agree in name, unit and
// description and an exporter shows them as one.
func NewInstruments(m metric.Meter) Instruments {
	var r Instruments
	r.Queued, _ = m.Float64Histogram("clinvoke.run.queued", metric.WithUnit("s"),
		metric.WithDescription("Time a run or session waited in one queue of its admission, by clinvoke.queue (budget: the host's Budget, Result.Queued; server, identity: an MCP server's slots) and clinvoke.queue.admitted."),
		metric.WithExplicitBucketBoundaries(queuedBuckets...))
	r.Waiting, _ = m.Int64UpDownCounter("clinvoke.runs.waiting", metric.WithUnit("{run}"),
		metric.WithDescription("Runs and sessions waiting to be admitted now, by clinvoke.queue."))
	return r
}

// QueuedAttrs are the attributes of the event clinvoke.queued of a wait
// in queue where w says.
func QueuedAttrs(queue string, w Wait) []attribute.KeyValue {
	kv := []attribute.KeyValue{KeyQueue.String(queue), KeyAhead.Int(w.Ahead)}
	if w.Gate != "" {
		kv = append(kv, KeyGate.String(w.Gate), KeyGateUntil.String(w.Until.UTC().Format(time.RFC3339)))
	}
	return kv
}

// AdmittedAttrs are the attributes of the event clinvoke.admitted of a
// wait in queue that took waited and ended admitted or not (ok).
func AdmittedAttrs(queue string, waited time.Duration, ok bool) []attribute.KeyValue {
	return []attribute.KeyValue{KeyQueue.String(queue), KeyWaited.Float64(waited.Seconds()), KeyAdmitted.Bool(ok)}
}
