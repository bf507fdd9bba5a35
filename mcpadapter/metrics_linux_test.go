package mcpadapter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// freeAddr returns a free port of 127.0.0.1, for the server's -metrics.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape gets url and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// value returns the value of the sample of family name whose labels
// include want (a counter, gauge or the count of a histogram), summed
// over the matching samples, and whether one matched.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var v float64
	found := false
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if labels[k] != w {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, found
}

// checkScrape checks the metrics of a server that ran one answered call
// and one refused, the call's wait for a slot among them, and that
// /healthz answers.
func checkScrape(t *testing.T, addr string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET /healthz = %s %q, want 200 ok", resp.Status, body)
	}
	fams := scrape(t, "http://"+addr+"/metrics")
	codex := map[string]string{"clinvoke_cli": "codex", "clinvoke_mode": "invoke"}
	for _, c := range []struct {
		name string
		want map[string]string
		val  float64
	}{
		{"clinvoke_runs_started_total", codex, 1},
		{"clinvoke_runs_ended_total", map[string]string{"clinvoke_cli": "codex", "clinvoke_outcome": "answered"}, 1},
		{"clinvoke_runs_active", codex, 0},
		{"clinvoke_run_duration_seconds", map[string]string{"clinvoke_outcome": "answered"}, 1},
		{"clinvoke_run_first_event_seconds", codex, 1},
		{"clinvoke_sweep_survivors_total", map[string]string{"clinvoke_cli": "codex"}, 0},
		// The call's wait for a slot of the server (none: 0 s), in the
		// family of the waits for the Budget.
		{"clinvoke_run_queued_seconds", map[string]string{"clinvoke_cli": "codex", "clinvoke_queue": "server", "clinvoke_queue_admitted": "true"}, 1},
	} {
		v, ok := value(fams, c.name, c.want)
		if !ok || v != c.val {
			var names []string
			for n := range fams {
				names = append(names, n)
			}
			t.Errorf("%s%v = %v (found %v), want %v; families: %v", c.name, c.want, v, ok, c.val, names)
		}
	}
}

// TestMetricsEndpoint runs a call through the example server over each
// transport, stdio and streamable HTTP, with -metrics, and scrapes the
// server's /metrics with the Prometheus text parser.
func TestMetricsEndpoint(t *testing.T) {
	bin := buildServer(t)
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, Answer: "served", Tag: fakeagent.NewTag()}
	call := func(t *testing.T, cs *mcp.ClientSession, root string) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", root)})
		if err != nil {
			t.Fatalf("CallTool() error = %v", err)
		}
		var out mcpadapter.Output
		decode(t, res, &out)
		if res.IsError || out.Text != "served" {
			t.Errorf("IsError %v, output %+v; want the fake's answer", res.IsError, out)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		root, addr := t.TempDir(), freeAddr(t)
		cs, cmd, _ := startServer(t, bin, s, root, filepath.Join(t.TempDir(), "t.jsonl"), "-metrics", addr)
		call(t, cs, root)
		checkScrape(t, addr)
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("server exit: %v, want success", cmd.ProcessState)
		}
	})

	t.Run("http", func(t *testing.T) {
		root, addr := t.TempDir(), freeAddr(t)
		srv := startHTTPServer(t, bin, s, root, filepath.Join(t.TempDir(), "t.jsonl"), "-metrics", addr)
		cs, _ := connectHTTP(t, srv.url, nil, 0)
		call(t, cs, root)
		checkScrape(t, addr)
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-srv.exited:
		case <-time.After(testenv.Timeout(testenv.Hang)):
			t.Fatal("the server did not exit after SIGTERM")
		}
		if st := srv.cmd.ProcessState; st == nil || !st.Success() {
			t.Errorf("server exit: %v, want success", st)
		}
		// The metrics endpoint stops with the server.
		if _, err := http.Get("http://" + addr + "/metrics"); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("GET /metrics after the server exited: %v, want connection refused", err)
		}
	})
	noSurvivors(t, s.Tag)
}
