//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Hostile probes of the sandbox with the real CLIs, driven by the fake
// model: what a model asks for, and the program allows, must still be
// refused by the kernel, and the refusal must be visible to the program.

// probeEvents records the events of a run that show an attempt: tool
// results and warnings.
type probeEvents struct {
	mu      sync.Mutex
	results []invoker.Tool
	warns   []string
}

// on is the OnEvent callback that records into p.
func (p *probeEvents) on(ev invoker.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case ev.Kind == invoker.KindToolResult && ev.Tool != nil:
		p.results = append(p.results, *ev.Tool)
	case ev.Kind == invoker.KindWarning:
		p.warns = append(p.warns, ev.Text)
	}
}

// log writes what p recorded to t's log.
func (p *probeEvents) log(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.results {
		t.Logf("%s result (%s): %.300s", r.Name, r.Status, r.Output)
	}
	for _, w := range p.warns {
		t.Logf("warning: %.300s", w)
	}
}

// refused reports whether a tool result or a warning p recorded tells of
// a refusal by the system: a failed result, or a denial in a result's
// output or in a warning.
func (p *probeEvents) refused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	denial := func(s string) bool {
		s = strings.ToLower(s)
		return strings.Contains(s, "permission denied") || strings.Contains(s, "eacces") ||
			strings.Contains(s, "not permitted") || strings.Contains(s, "refused")
	}
	for _, r := range p.results {
		if r.Status == "failed" || r.Status == "error" || denial(r.Output) {
			return true
		}
	}
	return slices.ContainsFunc(p.warns, denial)
}

// probe runs req on r with its events recorded, logs them, and fails t
// if Invoke fails.
func probe(t *testing.T, r *rig, req invoker.Request) (*invoker.Result, *probeEvents) {
	t.Helper()
	var ev probeEvents
	req.OnEvent = ev.on
	res, err := r.invoke(context.Background(), req)
	ev.log(t)
	if err != nil {
		t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
	}
	return res, &ev
}

// neverSent fails t if a request the fake model received contains secret.
func neverSent(t *testing.T, srv *fakemodel.Server, secret string) {
	t.Helper()
	for _, q := range srv.Requests() {
		if q.Contains(secret) {
			t.Errorf("the secret reached the model")
			return
		}
	}
}

// TestSandboxProbeLinkSwap: the model asks to write workdir/sub/f, the
// judge finds it inside, and the program's Approve callback, before it
// allows, swaps a link in: workdir/sub replaced by a symbolic link to a
// directory outside ("dir"), or workdir/sub/f made a dangling symbolic
// link to a file outside ("file"), which an open that creates follows.
// Under the required sandbox at WorkspaceWrite nothing is written outside
// and the refusal shows as a failed tool result. With the sandbox off the
// write lands outside, or the CLI refuses on its own, visibly: measured
// with the pinned versions, both CLIs re-check after the approval and
// refuse both links, Claude Code ("its parent-directory symlink
// resolution changed after permission was checked") and Gemini CLI
// ("resolves outside the allowed workspace directories"). Codex, under
// the approval policy "untrusted", asks before its apply_patch and does
// not check again: without the sandbox its own lets the write through
// either link into the directory outside (under /tmp, which Codex's
// workspace-write leaves writable); under it the patch fails.
func TestSandboxProbeLinkSwap(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		for _, link := range []string{"dir", "file"} {
			for _, mode := range []string{"required", "off"} {
				t.Run(link+"/"+mode, func(t *testing.T) {
					linkSwap(t, newRig(t, r.cli), link, mode)
				})
			}
		}
	})
}

// linkSwap runs the probe of TestSandboxProbeLinkSwap on r, swapping the
// link of kind link ("dir" or "file") in, with the sandbox's mode.
func linkSwap(t *testing.T, r *rig, link, mode string) {
	sub := filepath.Join(r.workdir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	target, escaped := filepath.Join(sub, "f"), filepath.Join(outside, "f")
	var a approvals
	allow := a.decide(invoker.Decision{Allow: true})
	var swapped atomic.Bool
	req := r.sandboxed("write the file", invoker.WorkspaceWrite)
	req.Sandbox.Mode = mode
	req.Approve = func(ctx context.Context, ap invoker.Approval) invoker.Decision {
		if ap.Kind == invoker.ApprovalFileChange && swapped.CompareAndSwap(false, true) {
			var err error
			if link == "dir" {
				if err = os.RemoveAll(sub); err == nil {
					err = os.Symlink(outside, sub)
				}
			} else {
				err = os.Symlink(escaped, target)
			}
			if err != nil {
				t.Error(err)
			}
		}
		return allow(ctx, ap)
	}
	r.srv.Enqueue(twoWayOf(t, r.cli.name).write(target, "PLANTED through the link"), fakemodel.EchoToolResult("after: "))
	res, ev := probe(t, r, req)
	b, statErr := os.ReadFile(escaped)
	landed := statErr == nil
	if !swapped.Load() {
		t.Fatalf("Approve was asked %s, want a file change to swap the link in; answer: %.300s", jsonString(a.list()), res.Text)
	}
	t.Logf("answer: %.300s; outside: %q", res.Text, b)
	switch {
	case mode == "required" && landed:
		t.Errorf("%s was written through the link swapped in after the approval: %q", escaped, b)
	case !landed && !ev.refused():
		t.Errorf("nothing was written outside, but no tool result or warning shows the refused write")
	}
}

// TestSandboxProbeLevelDrop: for each CLI that holds sessions and
// switches permission, a background writer an allowed command starts in a
// sandboxed session's turn (a shell's &, Claude's run_in_background,
// Gemini's is_background) does not run during the next turn, at ReadOnly,
// whose first event, a warning, says so. The writer's turn is at
// Unlimited, or at WorkspaceWrite for Codex, whose commands run inside the
// sandbox there with its own sandbox off. Without the sandbox ("off", the
// proof that the probe is real) the writer runs on. TestSandboxSessionLevelDrop
// holds Claude's run_in_background; this holds each CLI's own way.
func TestSandboxProbeLevelDrop(t *testing.T) {
	forEachSessionRig(t, clis, func(t *testing.T, r *rig) {
		if !r.inv.Capabilities().SwitchPermission {
			t.Fatalf("%s cannot switch permission", r.cli.name)
		}
		for _, mode := range []string{"required", "off"} {
			t.Run(mode, func(t *testing.T) { levelDrop(t, newRig(t, r.cli), mode) })
		}
	})
}

// levelDrop runs the probe of TestSandboxProbeLevelDrop on r, with the
// sandbox's mode.
func levelDrop(t *testing.T, r *rig, mode string) {
	// A subdirectory: nothing can be made at the top of the working
	// directory at WorkspaceWrite.
	logs := filepath.Join(r.workdir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	bg := filepath.Join(logs, "bg.log")
	loop := "while true; do echo tick >> " + bg + "; sleep 0.05; done"
	var start fakemodel.Turn
	level := invoker.Unlimited
	switch r.cli.name {
	case "claude":
		start = fakemodel.CallTool("Bash", map[string]any{"command": loop, "run_in_background": true})
	case "gemini":
		start = fakemodel.CallTool("run_shell_command", map[string]any{"command": loop, "is_background": true})
	default:
		// Codex ends the process group of a command when it returns: the
		// writer leaves it.
		start = fakemodel.Shell("setsid sh -c '" + loop + "' </dev/null >/dev/null 2>&1 &")
		if mode == "required" {
			// Its commands run inside the sandbox at WorkspaceWrite.
			// With the sandbox off they run in Codex's own there, after
			// which no writer was found running: the proof runs at
			// Unlimited.
			level = invoker.WorkspaceWrite
		}
	}
	req := r.sandboxed("", level)
	req.Sandbox.Mode = mode
	s := r.openSession(t, r.inv, req.Session())
	writers := func() []string {
		return findProcs(func(env, cmdline []byte) bool {
			return hasVar(env, tagVar+"="+r.tag) && strings.Contains(string(cmdline), "tick >> "+bg)
		})
	}
	r.srv.Enqueue(start, fakemodel.Answer("started"))
	var ev probeEvents
	res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "start the writer", Permission: level, OnEvent: ev.on})
	ev.log(t)
	if err != nil {
		t.Fatalf("turn 1: %v; stderr tail:\n%s", err, res.Stderr)
	}
	r.waitFor("the background writer", 30*time.Second, func() bool { return len(writers()) > 0 })
	r.srv.Enqueue(fakemodel.Answer("read only now"))
	var ev2 probeEvents
	res, err = s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "carry on", Permission: invoker.ReadOnly, OnEvent: ev2.on})
	ev2.log(t)
	if err != nil {
		t.Fatalf("turn 2: %v; stderr tail:\n%s", err, res.Stderr)
	}
	left := writers()
	b, _ := os.ReadFile(bg)
	t.Logf("turn 2: %q, sandbox %q; %d ticks written; writers alive: %v", res.Text, res.Sandbox, strings.Count(string(b), "tick"), left)
	if mode == "off" {
		if len(left) == 0 {
			t.Errorf("without the sandbox the writer ended too: the probe proves nothing")
		}
		return
	}
	if len(left) > 0 {
		t.Errorf("the writer of the %s turn runs on in the ReadOnly turn: %v", level, left)
	}
	if !slices.ContainsFunc(ev2.warns, func(w string) bool { return strings.Contains(w, "the sandbox ended") }) {
		t.Errorf("warnings of the ReadOnly turn %q: want one saying what the sandbox ended", ev2.warns)
	}
}

// TestSandboxProbeSSHKeyApproved: a key planted in the test's ~/.ssh is
// not read at ReadOnly even when the Approve callback allows the read, and
// never reaches the model; the attempt shows as a failed tool result.
// Measured with the pinned versions: Claude Code asks about its Read of
// a path outside the working directory, and Codex, under the approval
// policy "untrusted", about its cat; the callback allows each, and the
// kernel refuses the open (EACCES), where without the sandbox ("off",
// kept as the proof that the probe is real) the key reaches the model.
// Gemini CLI refuses its read_file of a path outside its workspace on its
// own, without asking.
func TestSandboxProbeSSHKeyApproved(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		modes := []string{"required"}
		if r.cli.name != "gemini" {
			modes = append(modes, "off")
		}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) { sshKeyApproved(t, newRig(t, r.cli), mode) })
		}
	})
}

// sshKeyApproved runs the probe of TestSandboxProbeSSHKeyApproved on r,
// with the sandbox's mode.
func sshKeyApproved(t *testing.T, r *rig, mode string) {
	const secret = "SECRET-KEY-a1b2c3d4"
	key := plantKey(t, r.home, secret)
	var read fakemodel.Turn
	switch r.cli.name {
	case "claude":
		read = fakemodel.CallTool("Read", map[string]any{"file_path": key})
	case "gemini":
		read = fakemodel.CallTool("read_file", map[string]any{"file_path": key})
	default:
		read = fakemodel.Shell("cat " + key)
	}
	r.srv.Enqueue(read, fakemodel.EchoToolResult("after: "))
	req := r.sandboxed("show me the key", invoker.ReadOnly)
	req.Sandbox.Mode = mode
	var a approvals
	req.Approve = a.decide(invoker.Decision{Allow: true})
	res, ev := probe(t, r, req)
	asked := a.list()
	t.Logf("asked: %d; answer: %.300s", len(asked), res.Text)
	if r.cli.name != "gemini" && len(asked) == 0 {
		t.Errorf("Approve was never asked: the probe is of a read the program allows")
	}
	if mode == "off" {
		if !slices.ContainsFunc(r.srv.Requests(), func(q fakemodel.Request) bool { return q.Contains(secret) }) {
			t.Errorf("without the sandbox the key did not reach the model either: the probe proves nothing")
		}
		return
	}
	neverSent(t, r.srv, secret)
	if strings.Contains(res.Text, secret) {
		t.Errorf("the key reached the answer: %q", res.Text)
	}
	if !ev.refused() {
		t.Errorf("no tool result or warning shows the refused read")
	}
}

// TestSandboxProbeNetDirect: with network rules "none", a shell command
// of each CLI (its own sandbox and approvals off, Unlimited) reaches
// neither a host through the proxy by CONNECT (https: a denied
// connection and a warning naming it) nor, bypassing the proxy, a server
// on the host's loopback or an address outside, while the model stays
// reachable. TestSandboxNetInvoker holds plain http through the proxy and
// a server on another address of the host. The attempts that bypass the
// proxy are refused at once by the namespace (curl's "Couldn't connect",
// not its timeout) and recorded like the proxy's: each a denied
// Connection with its address and port, and a warning naming them. So is
// a UDP datagram the shell sends (bash's /dev/udp), its Connection and
// warning naming UDP, and one it sends to a multicast group (mDNS's),
// which the kernel answers with no error, its Connection naming the
// multicast address.
func TestSandboxProbeNetDirect(t *testing.T) {
	hidden := serveHidden(t)
	_, port, err := net.SplitHostPort(hidden)
	if err != nil {
		t.Fatal(err)
	}
	loopback := net.JoinHostPort("127.0.0.1", port)
	forEachCLI(t, func(t *testing.T, r *rig) {
		cmd := "curl -sS -m 30 https://denied.test/probe 2>&1; echo; curl -sS -m 30 --noproxy '*' http://" + loopback + "/probe 2>&1; " +
			"curl -sS -m 30 --noproxy '*' http://192.0.2.1/probe 2>&1; bash -c 'echo probe > /dev/udp/192.0.2.1/53' 2>&1; " +
			"bash -c 'echo probe > /dev/udp/224.0.0.251/5353' 2>&1; echo end"
		r.srv.Enqueue(fakemodel.Shell(cmd), fakemodel.EchoToolResult("net: "))
		req := r.request("probe the network")
		req.Permission = invoker.Unlimited
		req.Sandbox = invoker.Sandbox{Mode: "required", Network: []string{"none"}}
		res, ev := probe(t, r, req)
		t.Logf("the shell printed: %q; connections: %+v", res.Text, res.Connections)
		if !strings.Contains(res.Text, "end") || strings.Contains(res.Text, "hidden server") {
			t.Errorf("Result.Text = %q, want the command's end, and not the host's loopback server", res.Text)
		}
		var denied bool
		for _, c := range res.Connections {
			denied = denied || (c.Host == "denied.test" && c.Port == 443 && !c.Allowed)
			if c.Allowed && net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) == loopback {
				t.Errorf("a connection to the host's loopback server was allowed: %+v", c)
			}
		}
		if !denied {
			t.Errorf("Result.Connections %+v: want denied.test:443 denied", res.Connections)
		}
		if !slices.ContainsFunc(ev.warns, func(w string) bool { return strings.Contains(w, `add "denied.test:443" to Sandbox.Network`) }) {
			t.Errorf("warnings %q: want one naming denied.test:443 and the rule to add", ev.warns)
		}
		if strings.Contains(res.Text, "timed out") {
			t.Errorf("Result.Text = %q: a connection around the proxy waited for curl's timeout, want an immediate refusal", res.Text)
		}
		for _, hp := range []string{loopback, "192.0.2.1:80"} {
			if !slices.ContainsFunc(res.Connections, func(c invoker.Connection) bool {
				return !c.Allowed && net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) == hp
			}) {
				t.Errorf("Result.Connections %+v: want %s, which bypassed the proxy, denied", res.Connections, hp)
			}
			if !slices.ContainsFunc(ev.warns, func(w string) bool {
				return strings.Contains(w, "connection to "+hp+" that bypassed its proxy")
			}) {
				t.Errorf("warnings %q: want one naming %s and the proxy it bypassed", ev.warns, hp)
			}
		}
		if !slices.ContainsFunc(res.Connections, func(c invoker.Connection) bool {
			return !c.Allowed && c.Host == "192.0.2.1" && c.Port == 53 && strings.Contains(c.Err, "UDP")
		}) {
			t.Errorf("Result.Connections %+v: want the UDP datagram to 192.0.2.1:53 denied", res.Connections)
		}
		if !slices.ContainsFunc(ev.warns, func(w string) bool {
			return strings.Contains(w, "UDP datagram to 192.0.2.1:53 that bypassed its proxy")
		}) {
			t.Errorf("warnings %q: want one naming the UDP datagram to 192.0.2.1:53", ev.warns)
		}
		if !slices.ContainsFunc(res.Connections, func(c invoker.Connection) bool {
			return !c.Allowed && c.Host == "224.0.0.251" && c.Port == 5353 && strings.Contains(c.Err, "multicast")
		}) {
			t.Errorf("Result.Connections %+v: want the UDP datagram to the multicast group 224.0.0.251:5353 denied", res.Connections)
		}
		if !slices.ContainsFunc(ev.warns, func(w string) bool {
			return strings.Contains(w, "UDP datagram to 224.0.0.251:5353")
		}) {
			t.Errorf("warnings %q: want one naming the UDP datagram to 224.0.0.251:5353", ev.warns)
		}
	})
}
