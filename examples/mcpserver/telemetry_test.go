package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Log records made with a context that holds a span carry its ids.
func TestTraceHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(traceHandler{slog.NewTextHandler(&buf, nil)}).With("cli", "codex")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
	})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "run starting")
	log.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log = %q, want two records", buf.String())
	}
	if !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) || !strings.Contains(lines[0], "span_id="+sc.SpanID().String()) || !strings.Contains(lines[0], "cli=codex") {
		t.Errorf("record with a span = %q, want its trace_id and span_id", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("record without a span = %q, want no trace_id", lines[1])
	}
}

// -otlp URL exports the spans over OTLP/HTTP; close flushes them.
func TestOTLPExport(t *testing.T) {
	var (
		mu    sync.Mutex
		paths []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	tel, err := startTelemetry("", srv.URL+"/v1/traces", false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("startTelemetry() = %v", err)
	}
	if tel.tp == nil || tel.mp != nil {
		t.Fatalf("startTelemetry(-otlp) providers: tracer %v, meter %v; want a tracer provider only", tel.tp, tel.mp)
	}
	_, sp := tel.tp.Tracer("test").Start(context.Background(), "call")
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.close(ctx); err != nil {
		t.Fatalf("close() = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "/v1/traces" {
		t.Errorf("OTLP requests = %v, want a POST to /v1/traces", paths)
	}
}

// Without -metrics or -otlp (or the OTEL_EXPORTER_OTLP_* variables), no
// SDK is installed: the library uses otel's global no-op providers.
func TestNoTelemetry(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tel, err := startTelemetry("", "", false, slog.New(slog.DiscardHandler))
	if err != nil || tel.tp != nil || tel.mp != nil {
		t.Errorf("startTelemetry() = %+v, %v; want no providers", tel, err)
	}
}
