package mcpadapter_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestTelemetryMCPCancel cancels a call through MCP (the client's
// notifications/cancelled): the tool call's span continues the client's
// trace from the request's _meta, the run's span is its child and ends
// cancelled after the stop and the sweep, the metrics count the run as
// cancelled with the cancel-to-gone latency, and nothing survives.
func TestTelemetryMCPCancel(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("TracerProvider.Shutdown() = %v", err)
		}
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Errorf("MeterProvider.Shutdown() = %v", err)
		}
	})
	s := fakeagent.Script{Flavor: fakeagent.Codex, SessionID: "thread-mcp", Tool: true, StreamFor: time.Hour,
		Grandchild: true, Escapee: true, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := track(codex.New(invoker.Options{Binary: os.Args[0], Env: s.Env(),
		InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond,
		TracerProvider: tp, MeterProvider: mp}))
	h := newHarness(t, &mcpadapter.Options{ProgressInterval: time.Nanosecond, TracerProvider: tp}, inv)
	h.abandon()
	t.Cleanup(func() {
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill() // leave no sleeper behind if the library failed
		}
	})

	// The client's span, sent in _meta as the Claude Agent SDK and
	// OpenTelemetry's MCP conventions do.
	_, client := tp.Tracer("client").Start(context.Background(), "client call")
	sc := client.SpanContext()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", t.TempDir())}
		params.SetProgressToken("tok")
		params.Meta["traceparent"] = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		_, err := h.cs.CallTool(ctx, params)
		errc <- err
	}()
	for p := range h.progress {
		if strings.Contains(p.Message, "running: ") || strings.Contains(p.Message, "thinking") {
			break
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool() error = %v, want context.Canceled", err)
	}
	if err := <-inv.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("Invoke() error = %v, want context.Canceled", err)
	}
	client.End()
	noSurvivors(t, s.Tag)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := h.tools.Wait(wctx); err != nil {
		t.Fatalf("Tools.Wait() = %v", err)
	}

	if started, ended := len(spans.Started()), len(spans.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended: want every span ended", started, ended)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans.Ended() {
		byName[sp.Name()] = sp
	}
	call, run := byName["tools/call codex"], byName["invoke_agent codex"]
	if call == nil || run == nil {
		t.Fatalf("ended spans = %v, want tools/call codex and invoke_agent codex", byName)
	}
	if call.SpanContext().TraceID() != sc.TraceID() || call.Parent().SpanID() != sc.SpanID() || !call.Parent().IsRemote() {
		t.Errorf("tools/call span: trace %v parent %v, want the client's trace %v and span %v", call.SpanContext().TraceID(), call.Parent().SpanID(), sc.TraceID(), sc.SpanID())
	}
	if run.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("run span's parent = %v, want the tool call's span %v", run.Parent().SpanID(), call.SpanContext().SpanID())
	}
	if call.Status().Code != codes.Error || run.Status().Code != codes.Error {
		t.Errorf("span statuses: call %v, run %v; want Error for a cancelled call", call.Status(), run.Status())
	}
	want := map[attribute.Key]string{"clinvoke.outcome": "cancelled", "clinvoke.cli": "codex", "gen_ai.conversation.id": "thread-mcp", "clinvoke.permission": "read-only"}
	got := map[attribute.Key]string{}
	for _, kv := range run.Attributes() {
		got[kv.Key] = kv.Value.Emit()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("run span attribute %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []attribute.Key{"clinvoke.containment", "process.exit.code", "clinvoke.sweep.survivors"} {
		if _, ok := got[k]; !ok {
			t.Errorf("run span has no attribute %s", k)
		}
	}
	var evs []string
	for _, e := range run.Events() {
		evs = append(evs, e.Name)
	}
	for _, e := range []string{"clinvoke.start", "clinvoke.first_event", "clinvoke.tool_call", "clinvoke.stop", "clinvoke.interrupt", "clinvoke.sweep"} {
		if !strings.Contains(strings.Join(evs, " "), e) {
			t.Errorf("run span events = %v, want %s", evs, e)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var ended, stops, survivors int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value("clinvoke.outcome")
					switch {
					case m.Name == "clinvoke.runs.ended" && o.AsString() == "cancelled":
						ended += p.Value
					case m.Name == "clinvoke.sweep.survivors":
						survivors += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if r, _ := p.Attributes.Value("clinvoke.stop.reason"); m.Name == "clinvoke.stop.duration" && r.AsString() == "cancelled" {
						stops += int64(p.Count)
					}
				}
			}
		}
	}
	if ended != 1 || stops != 1 || survivors != 0 {
		t.Errorf("clinvoke.runs.ended{cancelled} = %d, clinvoke.stop.duration{cancelled} count = %d, clinvoke.sweep.survivors = %d; want 1, 1, 0", ended, stops, survivors)
	}
}

// TestTelemetryTraceReachesCLI: with no OpenTelemetry SDK installed at
// all, the client's trace context in _meta still reaches the CLI in
// TRACEPARENT, since the no-op spans carry their parent's context: a CLI
// that exports its own traces joins the client's trace.
func TestTelemetryTraceReachesCLI(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: "ok", RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	h := newHarness(t, nil, fakeCodex(s))
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	params := &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir()), Meta: mcp.Meta{"traceparent": tp, "tracestate": "vendor=1"}}
	res, err := h.cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("CallTool() = %+v, %v; want an answer", res, err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rec.Getenv("TRACEPARENT"); got != tp {
		t.Errorf("the CLI's TRACEPARENT = %q, want the client's %q", got, tp)
	}
	if got, _ := rec.Getenv("TRACESTATE"); got != "vendor=1" {
		t.Errorf("the CLI's TRACESTATE = %q, want the client's vendor=1", got)
	}
	noSurvivors(t, s.Tag)
}
