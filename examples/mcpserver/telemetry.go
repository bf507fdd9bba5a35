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

	"github.com/clinvoke/clinvoke/mcpadapter"
)

// telemetry is the server's OpenTelemetry SDK: nil providers when
// nothing was asked for, so that the library uses the global no-ops.
type telemetry struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	shutdown []func(context.Context) error

	// metrics serves /metrics and /healthz; nil without -metrics.
	metrics http.Handler
	// metricsLn is the metrics endpoint's own listener, bound at start
	// and served by serveMetrics; nil when it shares the MCP listener.
	metricsLn  net.Listener
	metricsLog *slog.Logger
	served     bool // serveMetrics serves metricsLn
}

// otlpFromEnv reports whether the standard variables name an OTLP endpoint.
func otlpFromEnv() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTelemetry installs the SDK the flags ask for: a Prometheus
// endpoint on metricsAddr, an OTLP/HTTP trace exporter to otlpURL (or the
// one the OTEL_EXPORTER_OTLP_* variables name). The metrics listener is
// bound before it returns, so that a bad address is an error at start;
// serveMetrics serves it once the server's access checks are known. When
// shared, the metrics go on the MCP listener (t.metrics) instead.
func startTelemetry(metricsAddr, otlpURL string, shared bool, logger *slog.Logger) (*telemetry, error) {
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
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("ok\n"))
		})
		t.metrics = mux
		if !shared {
			ln, err := net.Listen("tcp", metricsAddr)
			if err != nil {
				return nil, err
			}
			t.metricsLn, t.metricsLog = ln, logger
		}
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

// serveMetrics serves the metrics endpoint on its own listener, behind
// guard (the tools' Handler: the same access checks as the MCP endpoint).
func (t *telemetry) serveMetrics(guard func(http.Handler) http.Handler) {
	if t.metricsLn == nil {
		return
	}
	srv := &http.Server{Handler: guard(t.metrics), ReadHeaderTimeout: 10 * time.Second}
	ln := t.metricsLn
	t.served = true
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.metricsLog.Error("metrics endpoint failed", "err", err)
		}
	}()
	t.shutdown = append(t.shutdown, srv.Shutdown)
	t.metricsLog.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
}

// close flushes the exporters and stops the metrics endpoint, in reverse
// order of starting.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	if t.metricsLn != nil && !t.served {
		t.metricsLn.Close() // the server failed before serving it
	}
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

// observeTokens records whether the token file in place was taken, as the
// gauge clinvoke.tokens.file.rejected (Prometheus:
// clinvoke_tokens_file_rejected): 1 while the file does not parse or is
// gone, and the server still accepts the tokens of the last file it took;
// 0 once a good file replaces it. Each scrape looks at the file.
func observeTokens(mp metric.MeterProvider, tokens *mcpadapter.Tokens) error {
	if mp == nil || tokens == nil {
		return nil
	}
	_, err := mp.Meter("github.com/clinvoke/clinvoke/examples/mcpserver").Int64ObservableGauge("clinvoke.tokens.file.rejected",
		metric.WithDescription("1 while the token file in place was not taken (it does not parse or is gone): the tokens of the last file taken stay in force"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			v := int64(0)
			if tokens.Err() != nil {
				v = 1
			}
			o.Observe(v)
			return nil
		}))
	return err
}
