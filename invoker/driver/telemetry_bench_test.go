package driver_test

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// BenchmarkTelemetryOverhead runs the quick fake agent of
// BenchmarkInvokeQuick through three Invokers, each once per iteration in
// a shuffled order, so that the machine's load falls on all alike: one whose
// telemetry is removed (the baseline), one with otel's global providers
// and no SDK installed (what a program that does not use OpenTelemetry
// gets), and one with an SDK recording in memory. It reports each one's
// median time per run, its allocations and bytes per run, and the ratios
// of the no-SDK and SDK runs to the baseline (noop-time-ratio must stay
// within 1.02).
func BenchmarkTelemetryOverhead(b *testing.B) {
	s := fakeagent.Script{Answer: "quick"}
	req := benchRequest(b, &s)
	opts := invoker.Options{Binary: os.Args[0]}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	sdkOpts := opts
	sdkOpts.TracerProvider, sdkOpts.MeterProvider = tp, mp
	invs := []invoker.Invoker{
		driver.NewWithoutTelemetry(testBackend{}, opts),
		driver.New(testBackend{}, opts),
		driver.New(testBackend{}, sdkOpts),
	}
	times := make([][]time.Duration, len(invs))
	allocs := make([]uint64, len(invs))
	bytes := make([]uint64, len(invs))
	var ms0, ms1 runtime.MemStats
	n := 0
	order := []int{0, 1, 2}
	for b.Loop() {
		// A new order each time: a run pays for the garbage of the one
		// before it, and an SDK run leaves the most.
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			runtime.ReadMemStats(&ms0)
			start := time.Now()
			res, err := invs[i].Invoke(context.Background(), req)
			d := time.Since(start)
			runtime.ReadMemStats(&ms1)
			if err != nil || res.Text != "quick" {
				b.Fatalf("Invoke() = %+v, %v; want the answer", res, err)
			}
			times[i] = append(times[i], d)
			allocs[i] += ms1.Mallocs - ms0.Mallocs
			bytes[i] += ms1.TotalAlloc - ms0.TotalAlloc
		}
		n++
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ms(ds[len(ds)/2])
	}
	names := []string{"off", "noop", "sdk"}
	m := make([]float64, len(invs))
	for i, name := range names {
		m[i] = med(times[i])
		b.ReportMetric(m[i], name+"-ms")
		b.ReportMetric(float64(allocs[i])/float64(n), name+"-allocs/run")
		b.ReportMetric(float64(bytes[i])/float64(n), name+"-B/run")
	}
	b.ReportMetric(m[1]/m[0], "noop-time-ratio")
	b.ReportMetric(m[2]/m[0], "sdk-time-ratio")
	b.ReportMetric(float64(allocs[1])/float64(max(allocs[0], 1)), "noop-alloc-ratio")
	reportSurvivors(b, s.Tag)
}
