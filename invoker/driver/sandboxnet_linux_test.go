package driver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// The network part of the sandbox through the public API: Claude Code's
// fake, the CLI itself, asks for its model endpoint, for hosts the rules
// deny and for a raw connection that ignores the proxy (Script.Touch).

// requireSandboxNet fails (in CI, as root) or skips the test where this
// host holds no network rules: they need root (CAP_SYS_ADMIN).
func requireSandboxNet(t testing.TB) {
	t.Helper()
	c := benchInvoker().Capabilities()
	if !strings.Contains(c.Sandbox, "network") {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("Capabilities.Sandbox = %q (%s): CI runs as root, where the network rules must hold", c.Sandbox, c.SandboxNote)
		}
		t.Skipf("no network sandbox here: %s", c.SandboxNote)
	}
}

// countingServer is a server on the host's loopback that counts the
// requests it answers.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte("hello"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// touched returns the outcome of each of the fake's Touch lines in its
// answer ("get URL" → "ok" or the error).
func touched(res *invoker.Result) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(res.Text, "\n")[1:] {
		k, v, _ := strings.Cut(line, ": ")
		got[k] = v
	}
	return got
}

// portOf returns the port of srv.
func portOf(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// findConn returns the first of cs to host:port.
func findConn(cs []invoker.Connection, host string, port int) (invoker.Connection, bool) {
	for _, c := range cs {
		if c.Host == host && c.Port == port {
			return c, true
		}
	}
	return invoker.Connection{}, false
}

// TestSandboxNetNone: under "none", the run reaches its model endpoint
// (on the host's loopback, forwarded) and nothing else: a host through
// the proxy is refused (403, recorded, a warning event naming it and the
// rule to add); a connection that ignores the proxy, to an outside
// address or to another server on the host's loopback, is refused at
// once ("connection refused") and recorded the same way, a denied
// Connection and a warning naming its address and port; so is a UDP
// datagram (IPv4 and IPv6), its Connection and warning naming UDP.
func TestSandboxNetNone(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	model, modelHits := countingServer(t)
	other, otherHits := countingServer(t)
	var evs evlog
	udp := []string{"192.0.2.1:53"}
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		udp = append(udp, "[2001:db8::1]:443") // where the namespace has IPv6
	}
	touch := []string{
		"get " + model.URL + "/v1/messages", "get http://denied.example/", "dial 192.0.2.1:80", "get " + other.URL + "/",
		"dial 192.0.2.1:80", "dial 192.0.2.1:80", "udp 192.0.2.1:53",
	}
	for _, a := range udp {
		touch = append(touch, "udp "+a)
	}
	lr := newLimitRun(t, fakeagent.Script{Touch: touch})
	lr.req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	lr.req.Env = append(lr.req.Env, "ANTHROPIC_BASE_URL="+model.URL)
	lr.req.OnEvent = evs.on
	res, err := lr.inv.Invoke(context.Background(), lr.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v; stderr: %s", err, res.Stderr)
	}
	got := touched(res)
	if g := got["get "+model.URL+"/v1/messages"]; g != "ok" || modelHits.Load() != 1 {
		t.Errorf("the model endpoint: %q with %d requests, want ok with 1", g, modelHits.Load())
	}
	if g := got["get http://denied.example/"]; g != "403 Forbidden" {
		t.Errorf("a host through the proxy: %q, want 403 Forbidden", g)
	}
	if g := got["dial 192.0.2.1:80"]; !strings.Contains(g, "connection refused") {
		t.Errorf("a connection around the proxy: %q, want connection refused", g)
	}
	for _, a := range udp {
		if g := got["udp "+a]; !strings.Contains(g, "connection refused") {
			t.Errorf("a UDP datagram around the proxy to %s: %q, want connection refused", a, g)
		}
	}
	if g := got["get "+other.URL+"/"]; !strings.Contains(g, "connection refused") || otherHits.Load() != 0 {
		t.Errorf("another server of the host's loopback: %q with %d requests, want connection refused with 0", g, otherHits.Load())
	}
	if res.Sandbox != "filesystem,network" {
		t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
	}
	if c, ok := findConn(res.Connections, "127.0.0.1", portOf(t, model)); !ok || !c.Allowed || c.Received == 0 || c.Sent == 0 {
		t.Errorf("Result.Connections %+v: want the model endpoint allowed, with bytes each way", res.Connections)
	}
	if c, ok := findConn(res.Connections, "denied.example", 80); !ok || c.Allowed || c.Sent != 0 {
		t.Errorf("Result.Connections %+v: want denied.example:80 denied", res.Connections)
	}
	if ev, _, ok := evs.first(invoker.KindWarning, "denied.example:80"); !ok || !strings.Contains(ev.Text, `add "denied.example:80" to Sandbox.Network`) {
		t.Errorf("the warning of the denied connection: %q, want one naming it and the rule to add", ev.Text)
	}
	direct := []string{"192.0.2.1:80", "127.0.0.1:" + strconv.Itoa(portOf(t, other))}
	for _, hp := range direct {
		host, port, _ := strings.Cut(hp, ":")
		p, _ := strconv.Atoi(port)
		if c, ok := findConn(res.Connections, host, p); !ok || c.Allowed || c.Sent != 0 || c.Received != 0 {
			t.Errorf("Result.Connections %+v: want %s denied", res.Connections, hp)
		}
		if ev, _, ok := evs.first(invoker.KindWarning, hp); !ok || !strings.Contains(ev.Text, "bypassed its proxy") {
			t.Errorf("the warning of the connection to %s: %q, want one naming it and the proxy it bypassed", hp, ev.Text)
		}
	}
	for _, hp := range udp {
		host, port, _ := net.SplitHostPort(hp)
		p, _ := strconv.Atoi(port)
		if c, ok := findConn(res.Connections, host, p); !ok || c.Allowed || c.Sent != 0 || c.Received != 0 || !strings.Contains(c.Err, "UDP") {
			t.Errorf("Result.Connections %+v: want %s denied, naming UDP", res.Connections, hp)
		}
		if ev, _, ok := evs.first(invoker.KindWarning, hp); !ok || !strings.Contains(ev.Text, "UDP datagram to "+hp+" that bypassed its proxy") {
			t.Errorf("the warning of the datagram to %s: %q, want one naming it and UDP", hp, ev.Text)
		}
	}
	if n := evs.count(invoker.KindWarning); n != 1+len(direct)+len(udp) {
		t.Errorf("%d warnings, want %d: each denied connection's, one per address", n, 1+len(direct)+len(udp))
	}
	count := func(host string, port int) int {
		n := 0
		for _, c := range res.Connections {
			if c.Host == host && c.Port == port {
				n++
			}
		}
		return n
	}
	if n := count("192.0.2.1", 80); n != 3 {
		t.Errorf("%d Connections to 192.0.2.1:80, want 3: each attempt is recorded, though warned of once", n)
	}
	if n := count("192.0.2.1", 53); n != 2 {
		t.Errorf("%d Connections to 192.0.2.1:53, want 2: each datagram is recorded, though warned of once", n)
	}
}

// TestSandboxNetAfterDone: a connection the CLI tries after its terminal
// event and before it exits (as a CLI that reports to its vendor at exit
// does) is denied, recorded in Result.Connections, and warned of by a
// KindWarning event after KindDone, before Invoke returns: of a one-shot
// run, and of Invoke carried by a session of one turn (Approve), whose
// CLI tries it as it exits at the end of its input, after the turn.
func TestSandboxNetAfterDone(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	for _, session := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-shot", true: "one-turn session"}[session], func(t *testing.T) {
			var evs evlog
			lr := newLimitRun(t, fakeagent.Script{TouchAtExit: []string{"dial 192.0.2.1:80"}})
			lr.req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
			lr.req.OnEvent = evs.on
			if session {
				lr.req.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
			} else {
				lr.gateAtDone()
			}
			res, err := lr.inv.Invoke(context.Background(), lr.req)
			if err != nil {
				t.Fatalf("Invoke() error = %v; stderr: %s", err, res.Stderr)
			}
			if !strings.Contains(res.Stderr, "dial 192.0.2.1:80: ") || !strings.Contains(res.Stderr, "connection refused") {
				t.Errorf("the fake's stderr %q: want its connection at exit refused", res.Stderr)
			}
			deniedAfterDone(t, res, &evs)
		})
	}
}

// deniedAfterDone checks that res holds the fake's connection to
// 192.0.2.1:80 (TouchAtExit) denied, and that its warning came after
// KindDone, the last of the events.
func deniedAfterDone(t *testing.T, res *invoker.Result, evs *evlog) {
	t.Helper()
	if c, ok := findConn(res.Connections, "192.0.2.1", 80); !ok || c.Allowed {
		t.Errorf("Result.Connections %+v: want 192.0.2.1:80 denied", res.Connections)
	}
	evs.mu.Lock()
	defer evs.mu.Unlock()
	done := slices.IndexFunc(evs.evs, func(ev invoker.Event) bool { return ev.Kind == invoker.KindDone })
	warned := slices.IndexFunc(evs.evs, func(ev invoker.Event) bool {
		return ev.Kind == invoker.KindWarning && strings.Contains(ev.Text, "192.0.2.1:80") && strings.Contains(ev.Text, "bypassed its proxy")
	})
	if done < 0 || warned < done || warned != len(evs.evs)-1 {
		var kinds []invoker.EventKind
		for _, ev := range evs.evs {
			kinds = append(kinds, ev.Kind)
		}
		t.Errorf("events %v: KindDone at %d, the warning of the connection after it at %d; want it after KindDone, last", kinds, done, warned)
	}
}

// TestSandboxNetSessionAfterDone: in a session, a connection the CLI
// tries after a turn's terminal event, before the turn has ended, is
// denied, in the turn's Connections, and a warning after its KindDone.
func TestSandboxNetSessionAfterDone(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	var evs evlog
	lr := newLimitRun(t, fakeagent.Script{TouchAtExit: []string{"dial 192.0.2.1:80"}})
	lr.req.OnEvent = evs.on
	lr.gateAtDone()
	sreq := lr.req.Session()
	sreq.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	s, err := lr.inv.OpenSession(context.Background(), sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "touch", OnEvent: lr.req.OnEvent})
	if err != nil {
		t.Fatal(err)
	}
	deniedAfterDone(t, res, &evs)
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// TestSandboxNetQuiet: under network rules that refuse Claude Code's own
// traffic (its model elsewhere than api.anthropic.com), the run's
// environment sets CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, so that the
// CLI does not send it and no run warns of it; not where the rules let it
// through (the default model hosts), not without network rules, and never
// over the value the caller set, even empty: the variable appears once.
func TestSandboxNetQuiet(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	const quiet = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
	model, _ := countingServer(t)
	for _, c := range []struct {
		name    string
		network []string
		env     []string
		want    []string // the CLI's values, in order
	}{
		{"model elsewhere", []string{"none"}, []string{"ANTHROPIC_BASE_URL=" + model.URL}, []string{"1"}},
		{"an allowlist without the host", []string{"example.com:443"}, []string{"ANTHROPIC_BASE_URL=" + model.URL}, []string{"1"}},
		{"the default model hosts", []string{"none"}, nil, nil},
		{"the host allowed", []string{"api.anthropic.com:443"}, []string{"ANTHROPIC_BASE_URL=" + model.URL}, nil},
		{"set by the caller", []string{"none"}, []string{"ANTHROPIC_BASE_URL=" + model.URL, quiet + "=0"}, []string{"0"}},
		{"set empty by the caller", []string{"none"}, []string{"ANTHROPIC_BASE_URL=" + model.URL, quiet + "="}, []string{""}},
		{"no network rules", nil, []string{"ANTHROPIC_BASE_URL=" + model.URL}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runEnvValues(t, invoker.Sandbox{Mode: "required", Network: c.network}, c.env, quiet)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s in the CLI's environment: %q, want %q", quiet, got, c.want)
			}
		})
	}
}

// TestSandboxNetAllowlist: a host the rules name is reached through the
// proxy; one they do not is refused, and so is an address of the host's
// loopback that only a rule naming it allows.
func TestSandboxNetAllowlist(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	allowed, allowedHits := countingServer(t)
	other, otherHits := countingServer(t)
	lr := newLimitRun(t, fakeagent.Script{Touch: []string{"proxy " + allowed.URL + "/", "proxy " + other.URL + "/"}},
		invoker.Options{Sandbox: invoker.Sandbox{Network: []string{"127.0.0.1:" + strconv.Itoa(portOf(t, allowed))}}})
	lr.req.Sandbox = invoker.Sandbox{Mode: "required"} // the Options' rules hold
	res, err := lr.inv.Invoke(context.Background(), lr.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v; stderr: %s", err, res.Stderr)
	}
	got := touched(res)
	if g := got["proxy "+allowed.URL+"/"]; g != "ok" || allowedHits.Load() != 1 {
		t.Errorf("the allowed host: %q with %d requests, want ok with 1", g, allowedHits.Load())
	}
	if g := got["proxy "+other.URL+"/"]; g != "403 Forbidden" || otherHits.Load() != 0 {
		t.Errorf("a host not allowed: %q with %d requests, want 403 Forbidden with 0", g, otherHits.Load())
	}
	if c, ok := findConn(res.Connections, "127.0.0.1", portOf(t, allowed)); !ok || !c.Allowed || c.Received == 0 {
		t.Errorf("Result.Connections %+v: want the allowed host allowed, with bytes back", res.Connections)
	}
	if c, ok := findConn(res.Connections, "127.0.0.1", portOf(t, other)); !ok || c.Allowed {
		t.Errorf("Result.Connections %+v: want the other host denied", res.Connections)
	}
}

// TestSandboxNetUnavailable: on a host that cannot give a run a network
// namespace, "required" fails before anything starts with ErrSandbox
// naming what is missing, and "available" runs with the filesystem
// ceiling alone, as Result.Sandbox and Capabilities say.
func TestSandboxNetUnavailable(t *testing.T) {
	requireSandbox(t)
	driver.SetNetProbe(t, "", &egress.NamespaceError{Op: "unshare(CLONE_NEWNET)", Err: syscall.EPERM,
		Missing: "a network namespace needs CAP_SYS_ADMIN: run the program as root"})
	lr := newLimitRun(t, fakeagent.Script{})
	if c := lr.inv.Capabilities(); c.Sandbox != "filesystem" || !strings.Contains(c.SandboxNote, "CAP_SYS_ADMIN") {
		t.Errorf("Capabilities: Sandbox %q, SandboxNote %q; want filesystem, and what the network rules need", c.Sandbox, c.SandboxNote)
	}
	lr.req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	res, err := lr.inv.Invoke(context.Background(), lr.req)
	if !errors.Is(err, invoker.ErrSandbox) || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") {
		t.Fatalf("required: error = %v, want ErrSandbox naming CAP_SYS_ADMIN", err)
	}
	if res != nil && res.ExitCode != -1 {
		t.Errorf("required: ExitCode = %d, want -1: nothing started", res.ExitCode)
	}
	if runs, _ := os.ReadDir(lr.script.RecordDir); len(runs) != 0 {
		t.Errorf("required: the CLI ran (%d records), want nothing started", len(runs))
	}
	lr.req.Sandbox.Mode = "available"
	res, err = lr.inv.Invoke(context.Background(), lr.req)
	if err != nil {
		t.Fatalf("available: Invoke() error = %v", err)
	}
	if res.Sandbox != "filesystem" || res.Connections != nil {
		t.Errorf("available: Result.Sandbox %q, Connections %v; want filesystem and none", res.Sandbox, res.Connections)
	}
}

// TestSandboxNetInvalid: rules that cannot be read, "none" beside rules,
// and rules without a sandbox mode are refused before anything starts.
func TestSandboxNetInvalid(t *testing.T) {
	lr := newLimitRun(t, fakeagent.Script{})
	for _, sb := range []invoker.Sandbox{
		{Mode: "available", Network: []string{"none", "example.com"}},
		{Mode: "available", Network: []string{"exa mple.com"}},
		{Mode: "available", Network: []string{"example.com:99999"}},
		{Network: []string{"none"}},
	} {
		lr.req.Sandbox = sb
		if _, err := lr.inv.Invoke(context.Background(), lr.req); !errors.Is(err, invoker.ErrInvalidRequest) {
			t.Errorf("Sandbox %+v: error = %v, want ErrInvalidRequest", sb, err)
		}
	}
	if runs, _ := os.ReadDir(lr.script.RecordDir); len(runs) != 0 {
		t.Errorf("the CLI ran (%d records), want nothing started", len(runs))
	}
}

// TestSandboxNetSession: a warm session's namespace lives as long as the
// session: the CLI's attempts while opening are in its first turn's
// Result and warned of there, a later turn reports only its own, and
// every turn says the network rules held.
func TestSandboxNetSession(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	model, modelHits := countingServer(t)
	lr := newLimitRun(t, fakeagent.Script{Touch: []string{"get " + model.URL + "/v1/messages", "get http://denied.example/"}})
	sreq := lr.req.Session()
	sreq.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	sreq.Env = append(sreq.Env, "ANTHROPIC_BASE_URL="+model.URL)
	s, err := lr.inv.OpenSession(context.Background(), sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The model's connection is recorded once it closes, a moment after
	// the CLI's request: in the first turn, or at the latest the second.
	var all []invoker.Connection
	for i := range 2 {
		var evs evlog
		res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "touch", OnEvent: evs.on})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.Connections...)
		_, denied := findConn(res.Connections, "denied.example", 80)
		if res.Sandbox != "filesystem,network" || denied != (i == 0) || evs.count(invoker.KindWarning) != 1-i {
			t.Errorf("turn %d: Result.Sandbox %q, Connections %+v, %d warnings; want filesystem,network, the denied host in the first turn only, and its warning there",
				i+1, res.Sandbox, res.Connections, evs.count(invoker.KindWarning))
		}
		if !strings.Contains(res.Text, "get http://denied.example/: 403 Forbidden") {
			t.Errorf("turn %d: answer %q, want the denied host refused", i+1, res.Text)
		}
	}
	if c, ok := findConn(all, "127.0.0.1", portOf(t, model)); len(all) != 2 || !ok || !c.Allowed {
		t.Errorf("the turns' Connections %+v: want the denied host and the model endpoint, allowed, once each", all)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if modelHits.Load() != 1 {
		t.Errorf("the model endpoint had %d requests, want 1", modelHits.Load())
	}
}

// TestSandboxNetWrap: the route a user takes where unprivileged user
// namespaces are allowed (as root too, made to take it): the CLI born in
// new user and network namespaces, its first stage applying the
// filesystem ceiling before it executes the CLI. The model is reached,
// a host through the proxy is refused, a connection around it is refused
// at once, and the ceiling holds as by the other route.
func TestSandboxNetWrap(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	driver.SetNetProbe(t, "wrap", nil)
	if c := fakeInvoker(t).Capabilities(); !strings.Contains(c.SandboxNote, "user namespace") {
		t.Errorf("Capabilities.SandboxNote = %q, want the user namespace route named", c.SandboxNote)
	}
	sandboxNetCeiling(t)
}

// TestSandboxNetCeiling: the filesystem ceiling holds with the network
// rules, by the route this host takes.
func TestSandboxNetCeiling(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	sandboxNetCeiling(t)
}

// sandboxNetCeiling runs the fake at ReadOnly under the network rules
// "none" and checks the network and the filesystem ceilings.
func sandboxNetCeiling(t *testing.T) {
	t.Helper()
	r := newSandboxRig(t)
	model, modelHits := countingServer(t)
	sb := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	t.Setenv("ANTHROPIC_BASE_URL", model.URL) // the host's environment, which the run inherits
	cg := "/sys/fs/cgroup/clinvoke-sandboxnet-" + filepath.Base(r.work)
	t.Cleanup(func() { os.Remove(cg) })
	got, res := r.invoke(t, invoker.ReadOnly, sb,
		"get "+model.URL+"/", "get http://denied.example/", "dial 192.0.2.1:80",
		"write $TMPDIR/x", "write "+r.work+"/a.txt", "read "+r.home+"/.ssh/id_ed25519", "write "+cg)
	if got["get "+model.URL+"/"] != "ok" || modelHits.Load() != 1 {
		t.Errorf("the model endpoint: %q with %d requests, want ok with 1", got["get "+model.URL+"/"], modelHits.Load())
	}
	if g := got["get http://denied.example/"]; g != "403 Forbidden" {
		t.Errorf("a host through the proxy: %q, want 403 Forbidden", g)
	}
	if g := got["dial 192.0.2.1:80"]; !strings.Contains(g, "connection refused") {
		t.Errorf("a connection around the proxy: %q, want connection refused", g)
	}
	tempOK := false
	for k, v := range got {
		tempOK = tempOK || (strings.HasPrefix(k, "write /") && strings.HasSuffix(k, "/x") && k != "write "+cg && v == "ok")
	}
	if !tempOK {
		t.Errorf("the write to TMPDIR failed: %v", got)
	}
	sandboxWant(t, got, nil, []string{"write " + r.work + "/a.txt", "read " + r.home + "/.ssh/id_ed25519", "write " + cg})
	if res.Sandbox != "filesystem,network" {
		t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
	}
	for _, hp := range []struct {
		host string
		port int
	}{{"denied.example", 80}, {"192.0.2.1", 80}} {
		if c, ok := findConn(res.Connections, hp.host, hp.port); !ok || c.Allowed {
			t.Errorf("Result.Connections %+v: want %s:%d denied", res.Connections, hp.host, hp.port)
		}
	}
}

// TestSandboxNetTelemetry: the run's span counts its allowed and denied
// connections and names each denied destination in an event; the
// counter clinvoke.net.connections has both.
func TestSandboxNetTelemetry(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	rig := newTelRig(t)
	model, _ := countingServer(t)
	lr := newLimitRun(t, fakeagent.Script{Touch: []string{"get " + model.URL + "/", "get http://denied.example/"}},
		invoker.Options{TracerProvider: rig.tp, MeterProvider: rig.mp})
	lr.req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	lr.req.Env = append(lr.req.Env, "ANTHROPIC_BASE_URL="+model.URL)
	if res, err := lr.inv.Invoke(context.Background(), lr.req); err != nil {
		t.Fatalf("Invoke() error = %v; stderr: %s", err, res.Stderr)
	}
	run := rig.span("invoke_agent claude")
	checkAttrs(t, run, attribute.Int64("clinvoke.net.allowed", 1), attribute.Int64("clinvoke.net.denied", 1))
	checkEventAttr(t, run, "clinvoke.net.denied", attribute.String("server.address", "denied.example"))
	if !hasEvent(run, "clinvoke.net.denied") {
		t.Errorf("run span events = %v, want clinvoke.net.denied", events(run))
	}
	rm := rig.collect()
	for _, allowed := range []bool{true, false} {
		if v, ok := sum(rm, "clinvoke.net.connections", attribute.String("clinvoke.cli", "claude"), attribute.Bool("clinvoke.net.allowed", allowed)); !ok || v != 1 {
			t.Errorf("clinvoke.net.connections{allowed=%v} = %v (present: %v), want 1", allowed, v, ok)
		}
	}
}

// TestSandboxNetGoTools: a session's Go tools, served over loopback HTTP
// from the host, stay reachable from inside the namespace under "none":
// Codex's fake calls one as an MCP client of its URL.
func TestSandboxNetGoTools(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	srv := newToolServer(make(chan error, 1), make(chan struct{}, 1))
	lr := newLimitRunOf(t, fakeagent.Codex, codex.New, fakeagent.Script{CallTool: "tools/echo", ToolArgs: json.RawMessage(`{"text":"from inside"}`)})
	sreq := lr.req.Session()
	sreq.MCPServers = []invoker.MCPServer{{Name: "tools", Server: srv}}
	sreq.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	s, err := lr.inv.OpenSession(context.Background(), sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "call the tool"})
	if err != nil {
		t.Fatalf("Turn() error = %v; stderr: %s", err, res.Stderr)
	}
	if !strings.Contains(res.Text, "echo: from inside") || res.Sandbox != "filesystem,network" {
		t.Errorf("Turn: answer %q, Sandbox %q; want the tool's result under the network rules", res.Text, res.Sandbox)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// TestSandboxNetGoToolsCommand: the Go tools' endpoint answers the CLI
// alone. Codex's fake calls a tool, then runs a command (a child in a
// session of its own, as the CLIs run theirs) that calls it with the
// same URL and bearer token: the command's connection is closed at once,
// a denied Connection to the endpoint and a warning naming the process,
// and the tool ran for the CLI's call only; by either route into the
// namespace.
func TestSandboxNetGoToolsCommand(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	none := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	t.Run("enter", func(t *testing.T) { goToolsCommand(t, none) })
	t.Run("wrap", func(t *testing.T) {
		driver.SetNetProbe(t, "wrap", nil)
		goToolsCommand(t, none)
	})
}

// TestSandboxNetGoToolsProxy: under a rule naming 127.0.0.1, which lets
// the proxy reach the host's loopback, a command that sends its call to
// the Go tools' endpoint through the proxy is refused as one that
// connects through the forwarder is, while the CLI's own call works.
func TestSandboxNetGoToolsProxy(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	goToolsCommandVia(t, invoker.Sandbox{Mode: "required", Network: []string{"127.0.0.1"}}, true, "")
}

// TestSandboxNetGoToolsRelay: under a rule allowing a relay on the
// host's loopback (a server the run may reach that connects where it is
// told, as an HTTP proxy or a fetch tool does), a command that sends its
// call through the relay reaches the Go tools' endpoint from a host
// process, not through the run's forwarder or proxy: it is refused and
// warned of, while the CLI's own call works.
func TestSandboxNetGoToolsRelay(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	relay, relayed := hostRelay(t)
	goToolsCommandVia(t, invoker.Sandbox{Mode: "required", Network: []string{relay}}, false, relay)
	if relayed.Load() == 0 {
		t.Errorf("the relay at %s carried no connection: the command's call did not go through it", relay)
	}
}

// hostRelay starts a relay on the host's loopback, ended with the test:
// each connection names on its first line the host:port to connect to,
// and the relay splices the rest both ways. It returns its address and
// the count of the connections it made.
func hostRelay(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var relayed atomic.Int64
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	relay := func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		target, err := br.ReadString('\n')
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", strings.TrimSpace(target))
		if err != nil {
			return
		}
		defer up.Close()
		relayed.Add(1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(up, br)
			up.(*net.TCPConn).CloseWrite()
		}()
		io.Copy(c, up)
		c.Close()
		<-done
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				relay(c)
			}()
		}
	}()
	return l.Addr().String(), &relayed
}

// TestGoToolsCommand: without network rules, where the CLI and its
// commands reach the Go tools' endpoint on the host's loopback directly,
// the endpoint still answers the CLI alone: the command's connection is
// closed at once and the turn has a warning naming it (no Connection is
// recorded without network rules).
func TestGoToolsCommand(t *testing.T) {
	goToolsCommand(t, invoker.Sandbox{})
}

// goToolsCommand is TestSandboxNetGoToolsCommand under sb, by the route
// in force.
func goToolsCommand(t *testing.T, sb invoker.Sandbox) { goToolsCommandVia(t, sb, false, "") }

// goToolsCommandVia is goToolsCommand with the command's call sent
// through the run's proxy if viaProxy, through the relay on the host at
// relay if not empty.
func goToolsCommandVia(t *testing.T, sb invoker.Sandbox, viaProxy bool, relay string) {
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	lr := newLimitRunOf(t, fakeagent.Codex, codex.New, fakeagent.Script{CallTool: "tools/echo", ToolArgs: json.RawMessage(`{"text":"from inside"}`), CommandCallsTool: true, CommandViaProxy: viaProxy, CommandRelay: relay})
	sreq := lr.req.Session()
	sreq.MCPServers = []invoker.MCPServer{{Name: "tools", Server: srv}}
	sreq.Sandbox = sb
	s, err := lr.inv.OpenSession(context.Background(), sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var warnings []string
	res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "call the tool", OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindWarning {
			warnings = append(warnings, ev.Text)
		}
	}})
	if err != nil {
		t.Fatalf("Turn() error = %v; stderr: %s", err, res.Stderr)
	}
	own, command, _ := strings.Cut(res.Text, "\ncommand: ")
	if !strings.Contains(own, "echo: from inside") {
		t.Errorf("the CLI's own call: %q, want the tool's result", own)
	}
	if !strings.HasPrefix(command, fakeagent.OutcomeToolFailed) {
		t.Errorf("the command's call: %q, want it refused (%s)", command, fakeagent.OutcomeToolFailed)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once (the CLI's call)", n)
	}
	var refused []invoker.Connection
	for _, c := range res.Connections {
		if !c.Allowed {
			refused = append(refused, c)
		}
	}
	switch {
	case len(sb.Network) == 0 && len(res.Connections) != 0:
		t.Errorf("Connections %+v without network rules, want none", res.Connections)
	case relay != "" && len(refused) != 0:
		t.Errorf("denied connections %+v, want none: the relay is allowed, and the endpoint refuses the relay's connection itself", refused)
	case relay == "" && len(sb.Network) != 0 && (len(refused) == 0 || refused[0].Host != "127.0.0.1" || !strings.Contains(refused[0].Err, "outside the CLI's session")):
		t.Errorf("denied connections %+v, want the command's to the Go tools' endpoint", refused)
	}
	if len(warnings) == 0 || !strings.Contains(warnings[0], "Go tools' endpoint") || !strings.Contains(warnings[0], "not the CLI") && !strings.Contains(warnings[0], "not a command") {
		t.Errorf("warnings %q, want one saying a process that is not the CLI tried the Go tools' endpoint", warnings)
	}
	if relay != "" && (len(warnings) == 0 || !strings.Contains(warnings[0], "not through the run's forwarder or proxy")) {
		t.Errorf("warnings %q, want one saying the connection came from the host, not through the run's forwarder or proxy", warnings)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// TestSandboxNetOffInRequest: Mode "off" in a request turns off the
// Options' network rules with the rest of the sandbox.
func TestSandboxNetOffInRequest(t *testing.T) {
	lr := newLimitRun(t, fakeagent.Script{}, invoker.Options{Sandbox: invoker.Sandbox{Mode: "required", Network: []string{"none"}}})
	lr.req.Sandbox = invoker.Sandbox{Mode: "off"}
	res, err := lr.inv.Invoke(context.Background(), lr.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	if res.Sandbox != "" || res.Connections != nil {
		t.Errorf("Result.Sandbox %q, Connections %v; want neither", res.Sandbox, res.Connections)
	}
}

// TestSandboxNetPTY: a CLI on a terminal (Options.PTY) is born in its
// namespace by either route, the terminal its controlling one.
func TestSandboxNetPTY(t *testing.T) {
	eachNetRoute(t, func(t *testing.T) {
		lr := newLimitRun(t, fakeagent.Script{Answer: "over a terminal", Touch: []string{"dial 192.0.2.1:80"}}, invoker.Options{PTY: true})
		lr.req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
		res, err := lr.inv.Invoke(context.Background(), lr.req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr: %s", err, res.Stderr)
		}
		if g := touched(res)["dial 192.0.2.1:80"]; !strings.HasPrefix(res.Text, "over a terminal") || !strings.Contains(g, "connection refused") || res.Sandbox != "filesystem,network" {
			t.Errorf("Text %q, Sandbox %q; want the answer, the connection around the proxy refused, and both ceilings", res.Text, res.Sandbox)
		}
		if c, ok := findConn(res.Connections, "192.0.2.1", 80); !ok || c.Allowed {
			t.Errorf("Result.Connections %+v: want 192.0.2.1:80 denied", res.Connections)
		}
	})
}

// TestSandboxNetPrivateTemp: under the network rules, by either route,
// the run has its own /tmp and /dev/shm, its working directory and home
// beneath /tmp bound back, and its CLI's settings held (one that is a
// link into a shown directory of the hidden home read through, and held
// as a link): by the root's
// forking thread on the Enter route, by the first stage in the run's user
// namespace on the Wrap route, which a user takes too.
func TestSandboxNetPrivateTemp(t *testing.T) {
	eachNetRoute(t, func(t *testing.T) {
		r := newSandboxRigIn(t, t.TempDir())
		name := filepath.Base(filepath.Dir(r.work))
		tmp, shm := "/tmp/private-"+name, "/dev/shm/private-"+name
		t.Cleanup(func() { os.Remove(tmp); os.Remove(shm) })
		settings, linked := r.home+"/.claude/settings.json", r.home+"/.claude/CLAUDE.md"
		if err := os.MkdirAll(r.home+"/dotfiles", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.home+"/dotfiles/CLAUDE.md", []byte("be kind"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../dotfiles/CLAUDE.md", linked); err != nil {
			t.Fatal(err)
		}
		got, res := r.invoke(t, invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required", Network: []string{"none"}, Show: []string{r.home + "/dotfiles"}},
			"write "+tmp, "read "+tmp, "write "+shm, "write "+r.work+"/a.txt", "write "+r.work+"/new.txt",
			"read "+r.home+"/.ssh/id_ed25519", "write "+settings, "replace "+settings, "write $TMPDIR/x",
			"read "+linked, "write "+linked, "remove "+linked)
		for _, k := range []string{"write " + tmp, "read " + tmp, "write " + shm, "write " + r.work + "/a.txt", "read " + linked} {
			if got[k] != "ok" {
				t.Errorf("%s: %q, want ok", k, got[k])
			}
		}
		for k, want := range map[string]string{"write " + r.work + "/new.txt": "read-only file system",
			"read " + r.home + "/.ssh/id_ed25519": "no such file or directory",
			"write " + settings:                   "read-only file system", "replace " + settings: "device or resource busy",
			"write " + linked: "read-only file system", "remove " + linked: "device or resource busy"} {
			if !strings.Contains(got[k], want) {
				t.Errorf("%s: %q, want %s", k, got[k], want)
			}
		}
		for _, p := range []string{tmp, shm} {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the run's %s reached the host: %v", p, err)
			}
		}
		if res.Sandbox != "filesystem,network" {
			t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
		}
	})
}

// eachNetRoute runs f as a subtest per route into the run's network
// namespace ("enter", as root; "wrap"), the network probe answering it.
func eachNetRoute(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	requireSandbox(t)
	requireSandboxNet(t)
	for _, route := range []string{"enter", "wrap"} {
		t.Run(route, func(t *testing.T) {
			if route == "enter" && os.Geteuid() != 0 {
				t.Skip("Enter needs root; the wrap subtest covers this user")
			}
			driver.SetNetProbe(t, route, nil)
			f(t)
		})
	}
}

// TestSandboxNetSessionClosedLogged: a connection a session's CLI tries
// after its last turn, at its exit, has no turn left to carry its
// warning: Close logs it, once, and the turn before did not warn of it.
func TestSandboxNetSessionClosedLogged(t *testing.T) {
	requireSandbox(t)
	requireSandboxNet(t)
	var log syncBuffer
	lr := newLimitRun(t, fakeagent.Script{TouchAtExit: []string{"dial 192.0.2.1:80"}}, invoker.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	sreq := lr.req.Session()
	sreq.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	s, err := lr.inv.OpenSession(context.Background(), sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs evlog
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "hello", OnEvent: evs.on}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	evs.mu.Lock()
	for _, ev := range evs.evs {
		if strings.Contains(ev.Text, "192.0.2.1:80") {
			t.Errorf("the turn warned %q of a connection made after it", ev.Text)
		}
	}
	evs.mu.Unlock()
	if got := strings.Count(log.String(), "no event could carry"); got != 1 || !strings.Contains(log.String(), "192.0.2.1:80") {
		t.Errorf("the run's log:\n%s\nwant one record of the connection at exit to 192.0.2.1:80", log.String())
	}
}

// syncBuffer is a strings.Builder safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
