package main

// Telemetry of the server: the library records through the OpenTelemetry
// API only; this program is the host that installs an SDK. With -metrics
// ADDR it serves the metrics in Prometheus text on ADDR/metrics (and a
// liveness probe on ADDR/healthz); with -otlp URL, or the standard
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variables, it exports the traces over OTLP/HTTP. Its log records carry
// the trace_id and span_id of the call they belong to.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is the server's OpenTelemetry SDK: nil providers when
// nothing was asked for, so that the library uses the global no-ops.
type telemetry struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	shutdown []func(context.Context) error
}

// otlpFromEnv reports whether the standard variables name an OTLP endpoint.
func otlpFromEnv() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTelemetry installs the SDK the flags ask for: a Prometheus
// endpoint on metricsAddr, an OTLP/HTTP trace exporter to otlpURL (or the
// one the OTEL_EXPORTER_OTLP_* variables name). The metrics listener is
// bound before it returns, so that a bad address is an error at start.
func startTelemetry(metricsAddr, otlpURL string, logger *slog.Logger) (*telemetry, error) {
	t := &telemetry{}
	res := resource.NewSchemaless(attribute.String("service.name", "clinvoke-mcpserver"))
	if metricsAddr != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, err
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		t.mp = mp
		t.shutdown = append(t.shutdown, mp.Shutdown)
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("ok\n"))
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics endpoint failed", "err", err)
			}
		}()
		t.shutdown = append(t.shutdown, srv.Shutdown)
		logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	if otlpURL != "" || otlpFromEnv() {
		var opts []otlptracehttp.Option
		if otlpURL != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(otlpURL))
		}
		exp, err := otlptracehttp.New(context.Background(), opts...)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tp = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	return t, nil
}

// close flushes the exporters and stops the metrics endpoint, in reverse
// order of starting.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	return errors.Join(errs...)
}

// traceHandler adds the trace_id and span_id of a record's context to it,
// so that the log of a call can be found from its trace and back.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
