//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// The variables that make the test binary the wrapper that runs a CLI in
// a network sandbox: the CLI, the model's host:port on the host's
// loopback, the name under which the proxy lets the model through (empty:
// the model is reached at its loopback address, forwarded), and the file
// that receives the recorded attempts.
const (
	sandboxNetCLI   = "CLINVOKE_E2E_SANDBOXNET_CLI"
	sandboxNetModel = "CLINVOKE_E2E_SANDBOXNET_MODEL"
	sandboxNetName  = "CLINVOKE_E2E_SANDBOXNET_NAME"
	sandboxNetOut   = "CLINVOKE_E2E_SANDBOXNET_OUT"
	sandboxNetWrapV = "CLINVOKE_E2E_SANDBOXNET_WRAP" // "1": start the CLI with Wrap, not Enter
)

func init() {
	if os.Getenv(sandboxNetCLI) != "" {
		os.Exit(sandboxNetWrap())
	}
}

// sandboxNetWrap runs the CLI with the wrapper's arguments and standard
// streams in an egress.Net, as the library's hook will: entered on the
// locked thread that starts the CLI. It writes the attempts to the out
// file and exits with the CLI's code.
func sandboxNetWrap() int {
	model, name := os.Getenv(sandboxNetModel), os.Getenv(sandboxNetName)
	cfg := &egress.Config{Loopback: []string{model}}
	if name != "" {
		cfg.Allow = []egress.Rule{{Host: name}}
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, model) // the name is the model's
		}
	}
	n, err := egress.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLINVOKE_E2E_SANDBOXNET_") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Getenv(sandboxNetCLI), os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdin, os.Stdout, os.Stderr, n.MergeEnv(env)
	started := make(chan error, 1)
	if os.Getenv(sandboxNetWrapV) == "1" {
		err := n.Wrap(cmd)
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			err = n.Started()
		}
		started <- err
	} else {
		started <- n.Start(cmd)
	}
	if err := <-started; err != nil {
		fmt.Fprintln(os.Stderr, err)
		n.Close()
		return 125
	}
	err = cmd.Wait()
	n.Close()
	b, _ := json.Marshal(n.Attempts())
	os.WriteFile(os.Getenv(sandboxNetOut), b, 0o644)
	if err != nil {
		return cmd.ProcessState.ExitCode()
	}
	return 0
}

// TestSandboxNetModel runs a turn of each real CLI in a network sandbox,
// entered by each route (Enter, Wrap): "forwarded", the model at its 127.0.0.1 address, reached through the
// loopback forwarder; "proxied", the model under a name only the proxy
// resolves, so the answer arrives only if the CLI sends its requests
// through HTTP(S)_PROXY. Every attempt is recorded.
func TestSandboxNetModel(t *testing.T) {
	for _, route := range []string{"enter", "wrap"} {
		for _, via := range []string{"forwarded", "proxied"} {
			t.Run(route+"/"+via, func(t *testing.T) {
				if route == "enter" && os.Geteuid() != 0 {
					t.Skip("Enter needs root; the wrap subtests cover this user")
				}
				forEachCLI(t, func(t *testing.T, r *rig) {
					sandboxNetTurn(t, r, route == "wrap", via == "proxied")
				})
			})
		}
	}
}

func sandboxNetTurn(t *testing.T, r *rig, wrap, proxied bool) {
	model := strings.TrimPrefix(r.srv.URL(), "http://")
	env := append([]string(nil), r.opts.Env...)
	var name string
	if proxied {
		_, port, _ := net.SplitHostPort(model)
		name = "model.test"
		env = rewriteModel(t, env, r.home, model, name+":"+port)
	}
	attempts := sandboxNetInvoker(t, r, env, model, name, wrap)

	r.srv.Enqueue(fakemodel.Answer("hi from the sandbox"))
	res, err := r.invoke(context.Background(), r.request("say hi"))
	modelAllowed := false
	for _, a := range attempts() {
		if a.Allowed && a.Received > 0 && (a.Host == name || a.Method == "FORWARD") {
			modelAllowed = true
		}
	}
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
	}
	if res.Text != "hi from the sandbox" {
		t.Errorf("Result.Text = %q, want %q", res.Text, "hi from the sandbox")
	}
	if !modelAllowed {
		t.Errorf("no recorded attempt reached the model")
	}
}

// sandboxNetInvoker makes r's Invoker start the CLI in a network sandbox
// (by Wrap if wrap, else by Enter) with env, the model at model (and
// under name behind the proxy, if not empty). It returns what reads the
// attempts the sandbox recorded, once the run is over, and logs them.
func sandboxNetInvoker(t *testing.T, r *rig, env []string, model, name string, wrap bool) func() []egress.Attempt {
	t.Helper()
	out := filepath.Join(t.TempDir(), "attempts.json")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), r.cli.name)
	writeWrapper(t, wrapper, self, []string{
		sandboxNetCLI + "=" + r.opts.Binary, sandboxNetModel + "=" + model,
		sandboxNetName + "=" + name, sandboxNetOut + "=" + out,
		sandboxNetWrapV + "=" + map[bool]string{true: "1", false: "0"}[wrap],
	})
	opts := r.opts
	opts.Binary, opts.Env = wrapper, env
	r.inv = r.cli.new(opts)
	return func() []egress.Attempt {
		b, _ := os.ReadFile(out)
		var attempts []egress.Attempt
		json.Unmarshal(b, &attempts)
		var seen []string
		for _, a := range attempts {
			seen = append(seen, fmt.Sprintf("%s %s:%d allowed=%v sent=%d received=%d %s", a.Method, a.Host, a.Port, a.Allowed, a.Sent, a.Received, a.Err))
		}
		t.Logf("attempts:\n%s", strings.Join(seen, "\n"))
		return attempts
	}
}

// TestSandboxNetShell: a shell command of each CLI, run with the CLI's own
// sandbox and approvals off (Unlimited), reaches neither a host the rules
// do not allow through the proxy (403, recorded as denied) nor a server
// of the host directly (refused), while the model stays reachable.
func TestSandboxNetShell(t *testing.T) {
	hidden := serveHidden(t)
	forEachCLI(t, func(t *testing.T, r *rig) {
		model := strings.TrimPrefix(r.srv.URL(), "http://")
		attempts := sandboxNetInvoker(t, r, r.opts.Env, model, "", os.Geteuid() != 0)
		cmd := "curl -sS -m 30 http://denied.test/probe; echo; curl -sS -m 30 --noproxy '*' http://" + hidden + "/probe 2>&1; echo end"
		r.srv.Enqueue(fakemodel.Shell(cmd), fakemodel.EchoToolResult("net: "))
		req := r.request("probe the network")
		req.Permission = invoker.Unlimited
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
		}
		t.Logf("the shell printed: %q", res.Text)
		if !strings.Contains(res.Text, "denied.test:80 denied") || !strings.Contains(res.Text, "end") {
			t.Errorf("Result.Text = %q, want the proxy's refusal of denied.test and the command's end", res.Text)
		}
		if strings.Contains(res.Text, "hidden server") {
			t.Errorf("Result.Text = %q: the shell reached the host's server directly", res.Text)
		}
		denied := false
		for _, a := range attempts() {
			if a.Host == "denied.test" && !a.Allowed && strings.Contains(a.Err, "not in the allowlist") {
				denied = true
			}
		}
		if !denied {
			t.Error("no denied attempt recorded for denied.test")
		}
	})
}

// serveHidden serves "hidden server" on every address of the host until
// the test ends, and returns the address to try from inside: a
// non-loopback one if the host has one, else 127.0.0.1.
func serveHidden(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hidden server") })}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	_, port, _ := net.SplitHostPort(l.Addr().String())
	host := "127.0.0.1"
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			host = p.Addr().String()
			break
		}
	}
	return net.JoinHostPort(host, port)
}

// rewriteModel replaces the model's address by to in env and in the
// files of home that name it (Codex's config.toml).
func rewriteModel(t *testing.T, env []string, home, from, to string) []string {
	t.Helper()
	for i, kv := range env {
		env[i] = strings.ReplaceAll(kv, from, to)
	}
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), from) {
			writeFile(t, p, strings.ReplaceAll(string(b), from, to))
		}
		return nil
	})
	return env
}

// TestSandboxNetInvoker: each CLI, through the Invoker with Sandbox
// network "none" and its own sandbox and approvals off (Unlimited),
// answers from the fake model (its configured base URL, on the host's
// loopback, forwarded), while a shell command the model asks for reaches
// neither a host through the proxy (403, a denied Connection and a
// warning event naming it) nor a server of the host directly.
func TestSandboxNetInvoker(t *testing.T) {
	hidden := serveHidden(t)
	forEachCLI(t, func(t *testing.T, r *rig) {
		cmd := "curl -sS -m 30 http://denied.test/probe; echo; curl -sS -m 30 --noproxy '*' http://" + hidden + "/probe 2>&1; echo end"
		r.srv.Enqueue(fakemodel.Shell(cmd), fakemodel.EchoToolResult("net: "))
		req := r.request("probe the network")
		req.Permission = invoker.Unlimited
		req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
		var warnings []string
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning {
				warnings = append(warnings, ev.Text)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
		}
		t.Logf("the shell printed: %q; connections: %+v", res.Text, res.Connections)
		if !strings.Contains(res.Text, "denied.test:80 denied") || !strings.Contains(res.Text, "end") || strings.Contains(res.Text, "hidden server") {
			t.Errorf("Result.Text = %q, want the proxy's refusal of denied.test, the command's end, and not the host's server", res.Text)
		}
		if res.Sandbox != "filesystem,network" {
			t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
		}
		var denied, model bool
		for _, c := range res.Connections {
			denied = denied || (c.Host == "denied.test" && c.Port == 80 && !c.Allowed)
			model = model || (c.Allowed && c.Received > 0)
		}
		if !denied || !model {
			t.Errorf("Result.Connections %+v: want denied.test:80 denied and the model reached", res.Connections)
		}
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, `add "denied.test:80" to Sandbox.Network`) }) {
			t.Errorf("warnings %q: want one naming denied.test:80 and the rule to add", warnings)
		}
	})
}

// TestSandboxNetCodexExitWarned: Codex with its analytics on, under
// network "none", connects to ab.chatgpt.com:443 as it exits, after its
// terminal event: the denial is a denied Connection and a warning event
// after KindDone, before Invoke returns.
func TestSandboxNetCodexExitWarned(t *testing.T) {
	r := newRig(t, cliNamed("codex"))
	r.srv.Enqueue(fakemodel.Answer("hi from the sandbox"))
	req := r.request("say hi")
	req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	req.ExtraArgs = []string{"-c", "analytics.enabled=true"}
	var evs []invoker.Event
	req.OnEvent = func(ev invoker.Event) { evs = append(evs, ev) }
	res, err := r.invoke(context.Background(), req)
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
	}
	t.Logf("connections: %+v", res.Connections)
	if !slices.ContainsFunc(res.Connections, func(c invoker.Connection) bool {
		return c.Host == "ab.chatgpt.com" && c.Port == 443 && !c.Allowed
	}) {
		t.Errorf("Result.Connections %+v: want ab.chatgpt.com:443 denied", res.Connections)
	}
	done := slices.IndexFunc(evs, func(ev invoker.Event) bool { return ev.Kind == invoker.KindDone })
	warned := slices.IndexFunc(evs, func(ev invoker.Event) bool {
		return ev.Kind == invoker.KindWarning && strings.Contains(ev.Text, "ab.chatgpt.com:443")
	})
	if done < 0 || warned < done {
		var kinds []string
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind.String()+" "+ev.Text)
		}
		t.Errorf("events:\n%s\nwant the warning of ab.chatgpt.com:443 after KindDone", strings.Join(kinds, "\n"))
	}
}
