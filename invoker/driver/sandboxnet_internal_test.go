package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxNetMustReach: what a run must reach is allowed with no rule:
// the model's configured base URL (a variable, or Codex's config.toml),
// else the CLI's default hosts; the MCP servers given by URL; those on the
// host's loopback forwarded rather than allowed through the proxy.
func TestSandboxNetMustReach(t *testing.T) {
	codexHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte("[model_providers.fake]\nbase_url = \"http://127.0.0.1:4100/v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mcp := []invoker.MCPServer{{Name: "a", URL: "https://mcp.example.com/mcp"}, {Name: "b", URL: "http://localhost:4200/mcp"}, {Name: "c", Command: "x"}}
	extra := []egress.Rule{{Host: "registry.npmjs.org", Port: 443}}
	for _, tc := range []struct {
		cli      string
		env      []string
		allow    []egress.Rule
		loopback []string
	}{
		{"claude", []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000"}, nil, []string{"127.0.0.1:4000"}},
		{"claude", []string{"HOME=" + t.TempDir()}, []egress.Rule{{Host: "api.anthropic.com", Port: 443}, {Host: "console.anthropic.com", Port: 443}}, nil},
		{"gemini", []string{"GOOGLE_GEMINI_BASE_URL=https://llm.internal.example"}, []egress.Rule{{Host: "llm.internal.example", Port: 443}}, nil},
		{"codex", []string{"CODEX_HOME=" + codexHome}, nil, []string{"127.0.0.1:4100"}},
		{"unknown", nil, nil, nil},
	} {
		cfg := netConfig(extra, tc.cli, tc.env, mcp)
		wantAllow := slices.Concat(extra, tc.allow, []egress.Rule{{Host: "mcp.example.com", Port: 443}})
		wantLoop := append(tc.loopback, "localhost:4200")
		if !slices.Equal(cfg.Allow, wantAllow) || !slices.Equal(cfg.Loopback, wantLoop) {
			t.Errorf("%s %v: Allow %v, Loopback %v; want %v, %v", tc.cli, tc.env, cfg.Allow, cfg.Loopback, wantAllow, wantLoop)
		}
	}
}

// TestSandboxNetPendingDropped: past maxPending refusals waiting for
// their warnings, the others are dropped from the queue but never in
// silence: the next warnings end with one that counts them, and an
// address whose refusal was dropped is warned of when it is refused
// again, as one never seen (while an address warned of stays quiet).
func TestSandboxNetPendingDropped(t *testing.T) {
	rn := &runNet{}
	refuse := func(i int) {
		rn.onAttempt(egress.Attempt{Method: egress.MethodDirectUDP, Host: fmt.Sprintf("192.0.2.%d", i%250), Port: 1000 + i, Err: "refused"})
	}
	const extra = 5
	for i := range maxPending + extra {
		refuse(i)
	}
	evs := rn.deniedWarnings(nil)
	if len(evs) != maxPending+1 {
		t.Fatalf("%d warnings, want %d: one per queued refusal and one counting the dropped", len(evs), maxPending+1)
	}
	if last := evs[len(evs)-1].Text; !strings.Contains(last, fmt.Sprintf("%d more", extra)) {
		t.Errorf("the last warning %q does not count the %d refusals dropped", last, extra)
	}
	refuse(maxPending) // dropped before
	refuse(0)          // warned of
	if evs := rn.deniedWarnings(nil); len(evs) != 1 || !strings.Contains(evs[0].Text, fmt.Sprintf("192.0.2.%d:%d", maxPending%250, 1000+maxPending)) {
		t.Errorf("after the drops, warnings %+v, want one for the address dropped before", evs)
	}
}

// TestSandboxNetLostWarning: refusals the kernel dropped unread (OnLost)
// are one warning saying that many attempts were made and not recorded,
// once.
func TestSandboxNetLostWarning(t *testing.T) {
	rn := &runNet{}
	rn.onLost(7)
	rn.onLost(3)
	evs := rn.deniedWarnings(nil)
	if len(evs) != 1 || evs[0].Kind != invoker.KindWarning || !strings.HasPrefix(evs[0].Text, "10 refusals were lost: ") || !strings.Contains(evs[0].Text, "not recorded") {
		t.Fatalf("warnings %+v, want one: 10 refusals were lost: … not recorded", evs)
	}
	if evs := rn.deniedWarnings(nil); len(evs) != 0 {
		t.Errorf("warnings again: %+v, want none", evs)
	}
}

// TestSandboxNetLostTelemetry: refusals the kernel dropped unread reach
// the run's telemetry as they are learned, where its denied connections
// go: the counter clinvoke.net.lost by the CLI, and the span's
// clinvoke.net.lost, the run's count; the warning still counts them.
func TestSandboxNetLostTelemetry(t *testing.T) {
	spans, rd := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	tel := newTelemetry(tp, mp)
	tel.bind("claude")
	_, sp := tel.begin(context.Background(), modeInvoke, "claude", &invoker.SessionRequest{})
	rn := &runNet{tel: sp}
	rn.onLost(7)
	rn.onLost(3)
	if evs := rn.deniedWarnings(nil); len(evs) != 1 || !strings.HasPrefix(evs[0].Text, "10 refusals were lost: ") {
		t.Errorf("warnings %+v, want one: 10 refusals were lost", evs)
	}
	sp.end(&invoker.Result{}, nil, false)
	ended := spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	var got attribute.Value
	for _, kv := range ended[0].Attributes() {
		if kv.Key == "clinvoke.net.lost" {
			got = kv.Value
		}
	}
	if got.AsInt64() != 10 {
		t.Errorf("span attribute clinvoke.net.lost = %v, want 10", got.Emit())
	}
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "clinvoke.net.lost" {
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value("clinvoke.cli"); v.AsString() == "claude" {
						total += p.Value
					}
				}
			}
		}
	}
	if total != 10 {
		t.Errorf("clinvoke.net.lost{clinvoke.cli=claude} = %d, want 10", total)
	}
}

// TestSandboxNetQuietEnv: the switch of a CLI's own traffic is added only
// where the caller's environment lacks the variable: one set, even
// empty, is the caller's decision and is never added a second time.
func TestSandboxNetQuietEnv(t *testing.T) {
	const quiet = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
	model := "ANTHROPIC_BASE_URL=http://127.0.0.1:9"
	cfg := netConfig(nil, "claude", []string{model}, nil)
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{model}, []string{quiet + "=1"}},
		{[]string{model, quiet + "="}, nil},
		{[]string{model, quiet + "=0"}, nil},
		{[]string{model, quiet + "=1"}, nil},
	} {
		if got := quietEnv("claude", c.env, cfg); !slices.Equal(got, c.want) {
			t.Errorf("quietEnv(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}

// TestSandboxNetCastWarning: a datagram to a broadcast or multicast
// address is warned of as one (discovery that never leaves the run),
// while a unicast one keeps the warning of a datagram around the proxy.
func TestSandboxNetCastWarning(t *testing.T) {
	rn := &runNet{}
	for _, host := range []string{"224.0.0.251", "255.255.255.255", "ff02::1", "192.0.2.1"} {
		rn.onAttempt(egress.Attempt{Method: egress.MethodDirectUDP, Host: host, Port: 5353, Err: "refused"})
	}
	evs := rn.deniedWarnings(nil)
	if len(evs) != 4 {
		t.Fatalf("%d warnings, want 4: %+v", len(evs), evs)
	}
	for i, want := range []string{"UDP datagram to 224.0.0.251:5353, a multicast address,", "UDP datagram to 255.255.255.255:5353, a broadcast address,", "UDP datagram to [ff02::1]:5353, a multicast address,", "UDP datagram to 192.0.2.1:5353 that bypassed its proxy"} {
		if !strings.Contains(evs[i].Text, want) {
			t.Errorf("warning %q, want it to say %q", evs[i].Text, want)
		}
	}
}
