package mcpadapter_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestSlotWaitCounted: a call held by MaxConcurrent is counted where a
// run waiting for the host's Budget is, told apart by clinvoke.queue: the
// gauge clinvoke.runs.waiting while it waits, the histogram
// clinvoke.run.queued once admitted (the first call's wait of 0
// included), and the span events clinvoke.queued and clinvoke.admitted on
// the call's span.
func TestSlotWaitCounted(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	release := make(chan struct{})
	started := make(chan string, 2)
	inv := &stub{name: "codex", fn: func(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
		started <- req.Prompt
		if req.Prompt == "first" {
			<-release
		}
		return &invoker.Result{Text: req.Prompt}, nil
	}}
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: 1, ProgressInterval: 1, TracerProvider: tp, MeterProvider: mp}, inv)
	dir := t.TempDir()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		h.call(context.Background(), t, "codex", args("first", dir), nil)
	}()
	if p := <-started; p != "first" {
		t.Fatalf("started %q, want first", p)
	}
	go func() {
		defer wg.Done()
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("second", dir)}
		params.SetProgressToken("tok-2")
		if _, err := h.cs.CallTool(context.Background(), params); err != nil {
			t.Errorf("CallTool() error = %v", err)
		}
	}()
	for p := range h.progress {
		if p.ProgressToken == "tok-2" && strings.Contains(p.Message, "queued") {
			break
		}
	}
	server := []attribute.KeyValue{attribute.String("clinvoke.cli", "codex"), attribute.String("clinvoke.queue", "server")}
	if v := slotGauge(t, rd, "clinvoke.runs.waiting", server); v != 1 {
		t.Errorf("clinvoke.runs.waiting{queue=server} = %d while the second call waits, want 1", v)
	}
	close(release)
	wg.Wait()
	if v := slotGauge(t, rd, "clinvoke.runs.waiting", server); v != 0 {
		t.Errorf("clinvoke.runs.waiting{queue=server} = %d after the waits, want 0", v)
	}
	admitted := append(slices.Clone(server), attribute.Bool("clinvoke.queue.admitted", true))
	if n, total := slotHistogram(t, rd, "clinvoke.run.queued", admitted); n != 2 || total <= 0 {
		t.Errorf("clinvoke.run.queued{queue=server, admitted} count %d, sum %v; want 2 (a wait of 0, and one longer)", n, total)
	}
	var events []string
	for _, s := range spans.Ended() {
		if s.Name() != "tools/call codex" {
			continue
		}
		for _, ev := range s.Events() {
			if ev.Name == "clinvoke.queued" || ev.Name == "clinvoke.admitted" {
				events = append(events, ev.Name)
				if !slices.Contains(ev.Attributes, attribute.String("clinvoke.queue", "server")) {
					t.Errorf("%s attributes %v, want clinvoke.queue=server", ev.Name, ev.Attributes)
				}
			}
		}
	}
	if !slices.Contains(events, "clinvoke.queued") || !slices.Contains(events, "clinvoke.admitted") {
		t.Errorf("the calls' spans have the events %v, want clinvoke.queued and clinvoke.admitted", events)
	}
}

// slotGauge is the value of the int64 sum name at the attributes want.
func slotGauge(t *testing.T, rd *sdkmetric.ManualReader, name string, want []attribute.KeyValue) int64 {
	t.Helper()
	var v int64
	for _, m := range slotMetrics(t, rd, name) {
		if d, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range d.DataPoints {
				if hasAll(p.Attributes, want) {
					v += p.Value
				}
			}
		}
	}
	return v
}

// slotHistogram is the count and sum of the float64 histogram name at the
// attributes want.
func slotHistogram(t *testing.T, rd *sdkmetric.ManualReader, name string, want []attribute.KeyValue) (uint64, float64) {
	t.Helper()
	var n uint64
	var total float64
	for _, m := range slotMetrics(t, rd, name) {
		if d, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, p := range d.DataPoints {
				if hasAll(p.Attributes, want) {
					n += p.Count
					total += p.Sum
				}
			}
		}
	}
	return n, total
}

func slotMetrics(t *testing.T, rd *sdkmetric.ManualReader, name string) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				out = append(out, m)
			}
		}
	}
	return out
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}
