package driver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// telRig is an OpenTelemetry SDK with in-memory exporters: a span
// recorder and a manual metric reader.
type telRig struct {
	t     *testing.T
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
	rd    *sdkmetric.ManualReader
	mp    *sdkmetric.MeterProvider
}

func newTelRig(t *testing.T) *telRig {
	t.Helper()
	r := &telRig{t: t, spans: tracetest.NewSpanRecorder(), rd: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.rd))
	t.Cleanup(func() {
		if err := r.tp.Shutdown(context.Background()); err != nil {
			t.Errorf("TracerProvider.Shutdown() = %v", err)
		}
		if err := r.mp.Shutdown(context.Background()); err != nil {
			t.Errorf("MeterProvider.Shutdown() = %v", err)
		}
	})
	return r
}

// options are the rig's providers, the fake agent as the binary and a
// short ladder.
func (r *telRig) options(extra ...invoker.Options) []invoker.Options {
	return append([]invoker.Options{{
		Binary: os.Args[0], Logger: testLogger(r.t),
		TracerProvider: r.tp, MeterProvider: r.mp,
		InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond,
	}}, extra...)
}

// checkAllEnded fails the test if a span was started and not ended.
func (r *telRig) checkAllEnded() {
	r.t.Helper()
	started, ended := len(r.spans.Started()), len(r.spans.Ended())
	if started != ended {
		r.t.Errorf("%d spans started, %d ended: want every span ended", started, ended)
	}
}

// span returns the one ended span named name.
func (r *telRig) span(name string) sdktrace.ReadOnlySpan {
	r.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		r.t.Fatalf("%d ended spans named %q, want 1 (all: %v)", len(found), name, spanNames(r.spans.Ended()))
	}
	return found[0]
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return n
}

// collect reads the metrics.
func (r *telRig) collect() metricdata.ResourceMetrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.rd.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("Collect() = %v", err)
	}
	return rm
}

// sum returns the value of the counter or up-down counter name summed over
// the data points whose attributes include want, and whether the metric
// exists.
func sum(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (float64, bool) {
	var total float64
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			found = true
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						total += float64(p.Value)
					}
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						total += p.Value
					}
				}
			}
		}
	}
	return total, found
}

// count returns how many values the histogram name recorded with
// attributes including want, and their sum.
func count(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (n uint64, total float64) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						n += p.Count
						total += p.Sum
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						n += p.Count
						total += float64(p.Sum)
					}
				}
			}
		}
	}
	return n, total
}

func hasAttrs(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// events returns the names of a span's events, in order.
func events(s sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, e := range s.Events() {
		n = append(n, e.Name)
	}
	return n
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// checkAttrs checks that s has each attribute of want.
func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(s)
	for _, kv := range want {
		if v, ok := got[kv.Key]; !ok || v != kv.Value {
			t.Errorf("span %q attribute %s = %v (set: %v), want %v", s.Name(), kv.Key, v.Emit(), ok, kv.Value.Emit())
		}
	}
}

// checkHasAttrs checks that s has attributes with these keys.
func checkHasAttrs(t *testing.T, s sdktrace.ReadOnlySpan, keys ...attribute.Key) {
	t.Helper()
	got := attrs(s)
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("span %q has no attribute %s; has %v", s.Name(), k, got)
		}
	}
}

// checkRunMetrics checks the counters of one run of cli that ended with
// outcome, and that nothing survived.
func checkRunMetrics(t *testing.T, rm metricdata.ResourceMetrics, cli, mode, outcome string) {
	t.Helper()
	c, m := attribute.String("clinvoke.cli", cli), attribute.String("clinvoke.mode", mode)
	if v, _ := sum(rm, "clinvoke.runs.started", c, m); v != 1 {
		t.Errorf("clinvoke.runs.started = %v, want 1", v)
	}
	if v, _ := sum(rm, "clinvoke.runs.ended", c, m, attribute.String("clinvoke.outcome", outcome)); v != 1 {
		t.Errorf("clinvoke.runs.ended{outcome=%s} = %v, want 1", outcome, v)
	}
	if v, ok := sum(rm, "clinvoke.runs.active", c, m); !ok || v != 0 {
		t.Errorf("clinvoke.runs.active = %v (present: %v), want 0", v, ok)
	}
	if n, _ := count(rm, "clinvoke.run.duration", c, m, attribute.String("clinvoke.outcome", outcome)); n != 1 {
		t.Errorf("clinvoke.run.duration{outcome=%s} count = %d, want 1", outcome, n)
	}
	if v, _ := sum(rm, "clinvoke.sweep.survivors"); v != 0 {
		t.Errorf("clinvoke.sweep.survivors = %v, want 0", v)
	}
}

// checkTraceparent checks that the fake agent got the run span's context
// in TRACEPARENT.
func checkTraceparent(t *testing.T, s fakeagent.Script, run sdktrace.ReadOnlySpan) {
	t.Helper()
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatalf("ReadRecord: %v", err)
	}
	got, ok := rec.Getenv("TRACEPARENT")
	sc := run.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if !ok || got != want {
		t.Errorf("the CLI's TRACEPARENT = %q (set: %v), want %q", got, ok, want)
	}
}

func codexScript(t *testing.T, s fakeagent.Script) fakeagent.Script {
	s.Flavor = fakeagent.Codex
	s.RecordDir = t.TempDir()
	s.Tag = fakeagent.NewTag()
	return s
}

func assertGone(t *testing.T, s fakeagent.Script, wantProcs int) {
	t.Helper()
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatalf("ReadRecord: %v", err)
	}
	if len(rec.Procs) < wantProcs {
		t.Errorf("fake agent recorded %d processes, want at least %d", len(rec.Procs), wantProcs)
	}
	if alive := rec.Alive(); len(alive) > 0 {
		t.Errorf("processes of the run still alive after Invoke returned: %v", alive)
	}
	if alive := fakeagent.Survivors(s.Tag); len(alive) > 0 {
		t.Errorf("processes carrying the run's tag still alive: %v", alive)
	}
}

// A run that answers: one span, child of the caller's, with the CLI, model,
// permission, containment, outcome, exit code and session id; events for
// the start, the first event, the tool call and the sweep; the CLI gets the
// span's context in TRACEPARENT.
func TestTelemetryAnswered(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{SessionID: "thread-tel", Answer: "Hello.", Tool: true})
	inv := codex.New(rig.options()...)
	ctx, parent := rig.tp.Tracer("test").Start(context.Background(), "caller")
	res, err := inv.Invoke(ctx, invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), Model: "gpt-test", Permission: invoker.WorkspaceWrite})
	parent.End()
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	assertGone(t, s, 1)
	rig.checkAllEnded()
	run := rig.span("invoke_agent codex")
	if run.Parent().SpanID() != parent.SpanContext().SpanID() || run.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("run span's parent = %v, want the caller's span %v", run.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	checkAttrs(t, run,
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "gpt-test"),
		attribute.String("gen_ai.conversation.id", "thread-tel"),
		attribute.String("clinvoke.cli", "codex"),
		attribute.String("clinvoke.mode", "invoke"),
		attribute.String("clinvoke.permission", "workspace-write"),
		attribute.String("clinvoke.containment", res.Containment),
		attribute.String("clinvoke.outcome", "answered"),
		attribute.Int("process.exit.code", 0),
	)
	if run.Status().Code == codes.Error {
		t.Errorf("run span status = %v, want not an error", run.Status())
	}
	for _, ev := range []string{"clinvoke.start", "clinvoke.first_event", "clinvoke.tool_call", "clinvoke.sweep"} {
		if !hasEvent(run, ev) {
			t.Errorf("run span events = %v, want %s", events(run), ev)
		}
	}
	if hasEvent(run, "clinvoke.interrupt") || hasEvent(run, "clinvoke.stop") {
		t.Errorf("run span events = %v, want no stop of a run that answered", events(run))
	}
	checkTraceparent(t, s, run)

	rm := rig.collect()
	checkRunMetrics(t, rm, "codex", "invoke", "answered")
	if n, _ := count(rm, "clinvoke.run.first_event", attribute.String("clinvoke.cli", "codex")); n != 1 {
		t.Errorf("clinvoke.run.first_event count = %d, want 1", n)
	}
	if n, _ := count(rm, "clinvoke.stop.duration"); n != 0 {
		t.Errorf("clinvoke.stop.duration count = %d, want 0 for a run nobody stopped", n)
	}
	if n, _ := count(rm, "gen_ai.client.token.usage", attribute.String("gen_ai.token.type", "output"), attribute.String("gen_ai.request.model", "gpt-test")); n != 1 && res.Usage.OutputTokens > 0 {
		t.Errorf("gen_ai.client.token.usage{output} count = %d, want 1 (usage %+v)", n, res.Usage)
	}
}

// A run cancelled by its context: outcome cancelled, the stop, the
// interrupt and the sweep in the span, and the cancel-to-gone latency.
func TestTelemetryCancelled(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{SessionID: "thread-c", Chunks: 3, StallFor: time.Minute, Grandchild: true})
	inv := codex.New(rig.options()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := inv.Invoke(ctx, invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke() error = %v, want context.Canceled", err)
	}
	assertGone(t, s, 2)
	rig.checkAllEnded()
	run := rig.span("invoke_agent codex")
	checkAttrs(t, run,
		attribute.String("clinvoke.outcome", "cancelled"),
		attribute.String("error.type", "cancelled"),
		attribute.String("gen_ai.conversation.id", "thread-c"),
	)
	checkHasAttrs(t, run, "clinvoke.containment", "process.exit.code")
	if run.Status().Code != codes.Error {
		t.Errorf("run span status = %v, want Error", run.Status())
	}
	for _, ev := range []string{"clinvoke.start", "clinvoke.first_event", "clinvoke.stop", "clinvoke.interrupt", "clinvoke.sweep"} {
		if !hasEvent(run, ev) {
			t.Errorf("run span events = %v, want %s", events(run), ev)
		}
	}
	checkTraceparent(t, s, run)
	rm := rig.collect()
	checkRunMetrics(t, rm, "codex", "invoke", "cancelled")
	if n, total := count(rm, "clinvoke.stop.duration", attribute.String("clinvoke.stop.reason", "cancelled")); n != 1 || total <= 0 {
		t.Errorf("clinvoke.stop.duration{reason=cancelled} = %d values summing %v s, want 1 > 0", n, total)
	}
}

// A run stopped by the idle timeout: outcome timeout.
func TestTelemetryTimeout(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{SessionID: "thread-t", StallFor: time.Minute})
	// The idle timer runs from the start: it must outlast the fake's own
	// start (under -race on a loaded machine, 300 ms did not, and the fake
	// was stopped before it recorded its run), and fire in its stall.
	inv := codex.New(rig.options(invoker.Options{IdleTimeout: 2 * time.Second})...)
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env()})
	if !errors.Is(err, invoker.ErrIdleTimeout) {
		t.Fatalf("Invoke() error = %v, want ErrIdleTimeout", err)
	}
	assertGone(t, s, 1)
	rig.checkAllEnded()
	run := rig.span("invoke_agent codex")
	checkAttrs(t, run, attribute.String("clinvoke.outcome", "timeout"), attribute.String("error.type", "timeout"))
	for _, ev := range []string{"clinvoke.stop", "clinvoke.interrupt", "clinvoke.sweep"} {
		if !hasEvent(run, ev) {
			t.Errorf("run span events = %v, want %s", events(run), ev)
		}
	}
	rm := rig.collect()
	checkRunMetrics(t, rm, "codex", "invoke", "timeout")
	if n, _ := count(rm, "clinvoke.stop.duration", attribute.String("clinvoke.stop.reason", "timeout")); n != 1 {
		t.Errorf("clinvoke.stop.duration{reason=timeout} count = %d, want 1", n)
	}
}

// A hostile CLI: it answers and exits, leaving a grandchild and an escapee
// in a session of its own; the sweep kills both, and says so.
func TestTelemetryEscapeeSwept(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{SessionID: "thread-h", Answer: "done", Grandchild: true, Escapee: true})
	inv := codex.New(rig.options()...)
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env()})
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	assertGone(t, s, 3)
	rig.checkAllEnded()
	run := rig.span("invoke_agent codex")
	checkAttrs(t, run, attribute.String("clinvoke.outcome", "answered"), attribute.Int("clinvoke.sweep.survivors", 0))
	var killed int64 = -1
	for _, e := range run.Events() {
		if e.Name == "clinvoke.sweep" {
			for _, kv := range e.Attributes {
				if kv.Key == "clinvoke.sweep.killed" {
					killed = kv.Value.AsInt64()
				}
			}
		}
	}
	if killed < 2 {
		t.Errorf("sweep event's clinvoke.sweep.killed = %d, want at least 2 (grandchild and escapee)", killed)
	}
	rm := rig.collect()
	checkRunMetrics(t, rm, "codex", "invoke", "answered")
	if v, _ := sum(rm, "clinvoke.sweep.processes", attribute.String("clinvoke.cli", "codex")); v < 2 {
		t.Errorf("clinvoke.sweep.processes = %v, want at least 2", v)
	}
}

// A hostile CLI that ignores SIGINT and SIGTERM: every step of the ladder
// is in the span, and the escapee is gone.
func TestTelemetryLadder(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{StreamFor: time.Minute, IgnoreSignals: true, Escapee: true})
	inv := codex.New(rig.options()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := inv.Invoke(ctx, invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindSession {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke() error = %v, want context.Canceled", err)
	}
	assertGone(t, s, 2)
	rig.checkAllEnded()
	run := rig.span("invoke_agent codex")
	want := []string{"clinvoke.stop", "clinvoke.interrupt", "clinvoke.terminate", "clinvoke.kill", "clinvoke.sweep"}
	got := events(run)
	i := 0
	for _, e := range got {
		if i < len(want) && e == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("run span events = %v, want %v in that order", got, want)
	}
	checkAttrs(t, run, attribute.String("clinvoke.outcome", "cancelled"), attribute.Int("process.exit.code", -1), attribute.String("clinvoke.exit.signal", "SIGKILL"))
	checkRunMetrics(t, rig.collect(), "codex", "invoke", "cancelled")
}

// A request refused before anything starts is a run too, with outcome
// rejected, and its span ends.
func TestTelemetryRejected(t *testing.T) {
	rig := newTelRig(t)
	inv := codex.New(rig.options()...)
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "", Workdir: t.TempDir()})
	if !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Fatalf("Invoke() error = %v, want ErrInvalidRequest", err)
	}
	rig.checkAllEnded()
	checkAttrs(t, rig.span("invoke_agent codex"), attribute.String("clinvoke.outcome", "rejected"))
	checkRunMetrics(t, rig.collect(), "codex", "invoke", "rejected")
}

// A session: a span for the CLI's process, and one per turn, child of the
// turn's context and linked to the session's; a cancelled turn is
// cancelled, and the session goes on.
func TestTelemetrySessionTurns(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{SessionID: "thread-s", Answers: []string{"one", "two"}})
	inv := codex.New(rig.options()...)
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env(), Model: "gpt-s", Deltas: true})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	ctx, parent := rig.tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := sess.Turn(ctx, invoker.TurnRequest{Prompt: "first"}); err != nil {
		t.Errorf("Turn() error = %v, want nil", err)
	}
	parent.End()
	// A cancelled turn ends in the CLI's protocol; the session goes on.
	tctx, cancel := context.WithCancel(context.Background())
	_, err = sess.Turn(tctx, invoker.TurnRequest{Prompt: "wait " + fakeagent.PromptStall, OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindDelta { // the answer stalls after its first delta
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) || errors.Is(err, invoker.ErrSessionClosed) {
		t.Errorf("cancelled Turn() error = %v, want context.Canceled with the session open", err)
	}
	if err := sess.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	assertGone(t, s, 1)
	rig.checkAllEnded()

	proc := rig.span("session codex")
	checkAttrs(t, proc, attribute.String("clinvoke.mode", "session"), attribute.String("clinvoke.outcome", "closed"), attribute.String("gen_ai.request.model", "gpt-s"))
	for _, ev := range []string{"clinvoke.start", "clinvoke.sweep"} {
		if !hasEvent(proc, ev) {
			t.Errorf("session span events = %v, want %s", events(proc), ev)
		}
	}
	checkTraceparent(t, s, proc)
	var turn, cancelled sdktrace.ReadOnlySpan
	for _, s := range rig.spans.Ended() {
		if s.Name() != "invoke_agent codex" {
			continue
		}
		if attrs(s)["clinvoke.outcome"].AsString() == "cancelled" {
			cancelled = s
		} else {
			turn = s
		}
	}
	if turn == nil || cancelled == nil {
		t.Fatalf("ended spans %v, want an answered and a cancelled turn", spanNames(rig.spans.Ended()))
	}
	if !hasEvent(cancelled, "clinvoke.interrupt") || hasEvent(proc, "clinvoke.interrupt") {
		t.Errorf("cancelled turn's events %v, session's %v: want the protocol interrupt on the turn, no ladder on the session", events(cancelled), events(proc))
	}
	if turn.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("turn span's parent = %v, want the caller's span", turn.Parent().SpanID())
	}
	if l := turn.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != proc.SpanContext().SpanID() {
		t.Errorf("turn span's links = %v, want the session's span", l)
	}
	checkAttrs(t, turn, attribute.String("clinvoke.mode", "turn"), attribute.String("clinvoke.outcome", "answered"), attribute.String("gen_ai.conversation.id", "thread-s"))
	if !hasEvent(turn, "clinvoke.first_event") {
		t.Errorf("turn span events = %v, want clinvoke.first_event", events(turn))
	}
	rm := rig.collect()
	if v, _ := sum(rm, "clinvoke.runs.ended", attribute.String("clinvoke.mode", "turn"), attribute.String("clinvoke.outcome", "cancelled")); v != 1 {
		t.Errorf("clinvoke.runs.ended{turn, cancelled} = %v, want 1", v)
	}
	if v, _ := sum(rm, "clinvoke.runs.ended", attribute.String("clinvoke.mode", "turn"), attribute.String("clinvoke.outcome", "answered")); v != 1 {
		t.Errorf("clinvoke.runs.ended{turn, answered} = %v, want 1", v)
	}
	if v, ok := sum(rm, "clinvoke.runs.active"); !ok || v != 0 {
		t.Errorf("clinvoke.runs.active = %v, want 0", v)
	}
	if v, ok := sum(rm, "clinvoke.sessions.active"); !ok || v != 0 {
		t.Errorf("clinvoke.sessions.active = %v (present %v), want 0 after Close", v, ok)
	}
}

// Without providers in Options, the global ones are used; with none
// installed the engine records nothing, and the CLI still gets the
// caller's trace context if the caller's context has one.
func TestTelemetryGlobalNoop(t *testing.T) {
	s := codexScript(t, fakeagent.Script{SessionID: "thread-g", Answer: "ok"})
	inv := codex.New(invoker.Options{Binary: os.Args[0], Logger: testLogger(t)})
	if _, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: append(s.Env(), "TRACEPARENT=")}); err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := rec.Getenv("TRACEPARENT"); strings.TrimSpace(v) != "" {
		t.Errorf("TRACEPARENT = %q without a trace, want it left as the caller set it (empty)", v)
	}
}
