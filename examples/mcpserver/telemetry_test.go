package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clinvoke/clinvoke/mcpadapter"
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

// TestTokensRejectedMetric: a token file replaced by one that does not
// parse shows as clinvoke_tokens_file_rejected 1 on /metrics, until a good
// file replaces it.
func TestTokensRejectedMetric(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file+".new", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	write("alice:" + testToken + "\n")
	tokens, err := mcpadapter.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := startTelemetry("127.0.0.1:0", "", true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.close(context.Background()) })
	if err := observeTokens(tel.mp, tokens); err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		tel.metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "clinvoke_tokens_file_rejected") {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		t.Fatalf("no clinvoke_tokens_file_rejected in /metrics:\n%s", rec.Body)
		return ""
	}
	if v := scrape(); v != "0" {
		t.Errorf("with a good file: clinvoke_tokens_file_rejected %s, want 0", v)
	}
	write("alice:short\n")
	if v := scrape(); v != "1" {
		t.Errorf("with a broken file: clinvoke_tokens_file_rejected %s, want 1", v)
	}
	write("alice:" + testToken + "\n")
	if v := scrape(); v != "0" {
		t.Errorf("with a good file again: clinvoke_tokens_file_rejected %s, want 0", v)
	}
}
