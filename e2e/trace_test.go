//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// traceparentRE matches a W3C traceparent value.
var traceparentRE = regexp.MustCompile(`00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]`)

// TestTraceparent checks that each real CLI receives its run's span
// context in TRACEPARENT: read from the CLI's own environment
// (/proc/PID/environ) while the model stalls, and compared with the span
// the run recorded. Then, for docs/cli-facts.md, what the CLI does with
// it: its shell tool inherits it (checked), and whether the CLI sends a
// traceparent header to the model API (logged).
func TestTraceparent(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer tp.Shutdown(context.Background())
		r.inv = r.cli.new(r.opts, invoker.Options{TracerProvider: tp})

		// The CLI's environment, while its model request stalls.
		r.srv.Enqueue(fakemodel.Stall("partial "))
		var (
			mu  sync.Mutex
			got string // the CLI process's TRACEPARENT
			cmd string
		)
		cancelWhen(t, r, r.request("say hi"), "the CLI runs with a TRACEPARENT", func() bool {
			found := findProcs(func(env, cmdline []byte) bool {
				if !hasVar(env, tagVar+"="+r.tag) {
					return false
				}
				for _, v := range bytes.Split(env, []byte{0}) {
					if val, ok := bytes.CutPrefix(v, []byte("TRACEPARENT=")); ok {
						mu.Lock()
						got = string(val)
						mu.Unlock()
						return true
					}
				}
				return false
			})
			if len(found) > 0 {
				mu.Lock()
				cmd = found[0]
				mu.Unlock()
			}
			return len(found) > 0 && len(r.srv.Scripted()) > 0
		})
		var run sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			if s.Name() == "invoke_agent "+r.cli.name {
				run = s
			}
		}
		if run == nil {
			t.Fatalf("no span invoke_agent %s ended", r.cli.name)
		}
		sc := run.SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		mu.Lock()
		if got != want {
			t.Errorf("the CLI's TRACEPARENT = %q, want the run's span %q", got, want)
		}
		t.Logf("%s: process %s has TRACEPARENT=%s", r.cli.name, cmd, got)
		mu.Unlock()
		for _, req := range r.srv.Requests() {
			if h := req.Header.Get("Traceparent"); h != "" {
				t.Logf("%s: model request %s %s carries traceparent %s (trace %s: %v)", r.cli.name, req.Method, req.Path, h,
					sc.TraceID(), strings.Contains(h, sc.TraceID().String()))
			}
		}

		// What the CLI's shell tool sees.
		r.srv.Enqueue(fakemodel.Shell("printenv TRACEPARENT"), fakemodel.EchoToolResult("tool saw: "))
		req := r.request("print the trace context")
		// Claude Code asks for approval of printenv below unlimited.
		req.Permission = invoker.Unlimited
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		tool := traceparentRE.FindString(res.Text)
		var second string
		for _, s := range spans.Ended() {
			if s.Name() == "invoke_agent "+r.cli.name && s.SpanContext().SpanID() != sc.SpanID() {
				c := s.SpanContext()
				second = "00-" + c.TraceID().String() + "-" + c.SpanID().String() + "-01"
			}
		}
		// Each pinned CLI passes it on to its tools unchanged
		// (docs/cli-facts.md): a tool that traces itself joins the run.
		if tool != second {
			t.Errorf("the shell tool printed TRACEPARENT %q, want the run's %q (answer %q)", tool, second, res.Text)
		}
		for _, req := range r.srv.Requests() {
			if h := req.Header.Get("Traceparent"); h != "" {
				t.Logf("%s: model request %s carries traceparent %s", r.cli.name, req.Path, h)
			}
		}
	})
}

// otelSetups configure each CLI's own OpenTelemetry to export traces to
// the fake model server (OTLP/HTTP JSON, which it records like any other
// request), and to send the trace context to the model API where the CLI
// can: the settings docs/cli-facts.md describes.
var otelSetups = map[string]func(t *testing.T, r *rig) []string{
	"codex": func(t *testing.T, r *rig) []string {
		f, err := os.OpenFile(filepath.Join(r.home, ".codex", "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "\n[otel]\ntrace_exporter = { otlp-http = { endpoint = %q, protocol = \"json\" } }\n", r.srv.URL()+"/v1/traces")
		return nil
	},
	"claude": func(t *testing.T, r *rig) []string {
		return []string{
			"CLAUDE_CODE_ENABLE_TELEMETRY=1", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1",
			"OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none",
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL(),
			"CLAUDE_CODE_PROPAGATE_TRACEPARENT=1", // a model API not at api.anthropic.com gets no traceparent without it
		}
	},
	"gemini": func(t *testing.T, r *rig) []string {
		return []string{
			"GEMINI_TELEMETRY_ENABLED=true", "GEMINI_TELEMETRY_TARGET=local",
			"GEMINI_TELEMETRY_OTLP_ENDPOINT=" + r.srv.URL(), "GEMINI_TELEMETRY_OTLP_PROTOCOL=http",
		}
	},
}

// joinsTrace says which pinned CLIs continue the trace of TRACEPARENT in
// the spans they export, and send it on to the model API.
var joinsTrace = map[string]bool{"codex": true, "claude": true, "gemini": false}

// TestTraceJoined runs each CLI with its own OpenTelemetry exporting to
// the fake model server, and checks whether the spans it exports belong to
// the run's trace and whether its model requests carry a traceparent of
// that trace: Codex and Claude Code do both, Gemini CLI exports traces of
// its own and sends no traceparent (docs/cli-facts.md).
func TestTraceJoined(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer tp.Shutdown(context.Background())
		env := otelSetups[r.cli.name](t, r)
		r.inv = r.cli.new(r.opts, invoker.Options{TracerProvider: tp, Env: env})
		r.srv.Enqueue(fakemodel.Answer("hello"))
		res, err := r.invoke(context.Background(), r.request("say hello"))
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		var trace string
		for _, s := range spans.Ended() {
			if s.Name() == "invoke_agent "+r.cli.name {
				trace = s.SpanContext().TraceID().String()
			}
		}
		if trace == "" {
			t.Fatalf("no span invoke_agent %s ended", r.cli.name)
		}
		exported, joined, header := false, false, false
		for _, q := range r.srv.Requests() {
			if q.Path == "/v1/traces" {
				exported = true
				joined = joined || q.Contains(trace)
			}
			if q.Scripted && strings.Contains(q.Header.Get("Traceparent"), trace) {
				header = true
			}
		}
		t.Logf("%s: exported traces %v, in the run's trace %v, traceparent to the model API %v", r.cli.name, exported, joined, header)
		if !exported {
			t.Errorf("the CLI exported no traces to the fake model server: its OpenTelemetry settings did not take")
		}
		if want := joinsTrace[r.cli.name]; joined != want || header != want {
			t.Errorf("spans in the run's trace %v, traceparent to the model API %v; want %v for both (docs/cli-facts.md)", joined, header, want)
		}
	})
}
