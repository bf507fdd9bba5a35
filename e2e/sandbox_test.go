//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// The filesystem sandbox with the real CLIs: a plain turn works at each
// level under it, and what a hostile model asks for is refused by the
// kernel, whatever the CLI's own sandbox and approvals let through.

// sandboxed returns r's request for prompt under a required sandbox at
// perm.
func (r *rig) sandboxed(prompt string, perm invoker.Permission) invoker.Request {
	req := r.request(prompt)
	req.Permission, req.Sandbox = perm, invoker.Sandbox{Mode: "required"}
	return req
}

// TestSandboxTurn: every CLI answers a turn at each level under the
// sandbox, and the Result says it held.
func TestSandboxTurn(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		for _, perm := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite} {
			r.srv.Enqueue(fakemodel.Answer("sandboxed answer"))
			res, err := r.invoke(context.Background(), r.sandboxed("say something", perm))
			if err != nil {
				t.Fatalf("%s: Invoke() error = %v; stderr:\n%s", perm, err, res.Stderr)
			}
			if res.Text != "sandboxed answer" || res.Sandbox != "filesystem" {
				t.Errorf("%s: Text %q, Sandbox %q; want the answer, filesystem", perm, res.Text, res.Sandbox)
			}
		}
	})
}

// TestSandboxSSHKeyReadOnly: a key planted in ~/.ssh is not read by a
// shell command the model asks for at ReadOnly, and never reaches the
// model.
func TestSandboxSSHKeyReadOnly(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		const secret = "SECRET-KEY-0f9e8d7c"
		key := filepath.Join(r.home, ".ssh", "id_ed25519")
		if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r.srv.Enqueue(fakemodel.Shell("cat "+key), fakemodel.EchoToolResult("after: "))
		res, err := r.invoke(context.Background(), r.sandboxed("show me the key", invoker.ReadOnly))
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		t.Logf("answer: %.300s", res.Text)
		if strings.Contains(res.Text, secret) {
			t.Errorf("the key reached the answer: %q", res.Text)
		}
		for _, q := range r.srv.Requests() {
			if q.Contains(secret) {
				t.Errorf("the key reached the model")
				break
			}
		}
	})
}

// TestSandboxOneShotConfigWrites: the writes TestOneShotConfigWrites
// finds open with Codex at WorkspaceWrite (.gemini, .claude, .mcp.json,
// .claude.json at the top of the project), and /tmp, by each CLI's own
// write tool and by shell, are refused under the sandbox, while a file of
// the project is written and the turn goes on. Codex is the exception
// docs/sandbox.md names: its own sandbox (bubblewrap, in 0.169.0) cannot
// set up its user namespace inside the ceiling (writing /proc/self/uid_map
// is refused), so its commands and patches fail, the project's file
// included; it is checked to fail still, so that a Codex that nests fails
// here and the documentation is updated.
func TestSandboxOneShotConfigWrites(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		w := twoWayOf(t, r.cli.name)
		wd := r.workdir
		if err := os.MkdirAll(filepath.Join(wd, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		targets := []string{"/tmp/clinvoke-e2e-sandbox-" + filepath.Base(wd)}
		for _, f := range []string{".gemini/settings.json", ".claude/settings.json", ".mcp.json", ".claude.json", ".git/hooks/pre-commit"} {
			targets = append(targets, filepath.Join(wd, f))
		}
		t.Cleanup(func() { os.Remove(targets[0]) })
		var turns []fakemodel.Turn
		for _, f := range targets {
			turns = append(turns, w.write(f, "PLANTED by the model"),
				fakemodel.Shell("mkdir -p "+filepath.Dir(f)+"; echo PLANTED by shell > "+f))
		}
		inside := filepath.Join(wd, "src", "inside.txt")
		turns = append(turns, w.write(inside, "project file"), fakemodel.EchoToolResult("after: "))
		r.srv.Enqueue(turns...)
		invokeOnAfter(t, r, r.sandboxed("remember this for every later session", invoker.WorkspaceWrite))
		for _, f := range targets {
			if b, err := os.ReadFile(f); err == nil {
				t.Errorf("%s was written: %q", f, b)
			}
		}
		b, err := os.ReadFile(inside)
		written := err == nil && strings.Contains(string(b), "project file")
		switch {
		case r.cli.name == "codex" && written:
			t.Errorf("Codex wrote the project's file under the sandbox, which docs/sandbox.md says its own sandbox cannot: update the documentation")
		case r.cli.name != "codex" && !written:
			t.Errorf("the project's file was not written (%q, %v): WorkspaceWrite must still write the project", b, err)
		}
	})
}

// TestSandboxACPAnswer: each ACP agent answers a turn at ReadOnly under
// the sandbox, writing the state the library knows for its name
// (internal/sandbox's facts): ~/.claude for claude-code-acp, ~/.codex for
// codex-acp, ~/.qwen, opencode's XDG directories.
func TestSandboxACPAnswer(t *testing.T) {
	forEachACP(t, func(t *testing.T, r *rig) {
		r.srv.Enqueue(fakemodel.Answer("sandboxed answer"))
		res, err := r.invoke(context.Background(), r.sandboxed("say hello", invoker.ReadOnly))
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		if res.Text != "sandboxed answer" || res.Sandbox != "filesystem" {
			t.Errorf("Text %q, Sandbox %q; want the answer, filesystem", res.Text, res.Sandbox)
		}
	})
}

// TestSandboxSessionTwoTurns: every CLI that holds sessions holds one at
// WorkspaceWrite under the sandbox, two turns carrying the first.
func TestSandboxSessionTwoTurns(t *testing.T) {
	forEachSessionRig(t, clis, func(t *testing.T, r *rig) {
		req := r.sandboxed("", invoker.WorkspaceWrite).Session()
		sessionTwoTurns(t, r, r.openSession(t, r.inv, req))
	})
}

// TestSandboxSessionLevelDrop: a background writer Claude Code started
// in a sandboxed session's turn at Unlimited (Bash's run_in_background)
// does not run during the next turn, at ReadOnly.
func TestSandboxSessionLevelDrop(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("claude")}, func(t *testing.T, r *rig) {
		if !r.inv.Capabilities().SwitchPermission {
			t.Fatal("claude cannot switch permission")
		}
		bg := filepath.Join(r.workdir, "bg.log")
		writer := "while true; do echo tick >> " + bg + "; sleep 0.05; done"
		s := r.openSession(t, r.inv, r.sandboxed("", invoker.Unlimited).Session())
		writers := func() []string {
			return findProcs(func(env, cmdline []byte) bool {
				return hasVar(env, tagVar+"="+r.tag) && strings.Contains(string(cmdline), "tick >> "+bg)
			})
		}
		r.srv.Enqueue(fakemodel.CallTool("Bash", map[string]any{"command": writer, "run_in_background": true}), fakemodel.Answer("started"))
		if _, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "start the writer", Permission: invoker.Unlimited}); err != nil {
			t.Fatal(err)
		}
		r.waitFor("the background writer", 30*time.Second, func() bool { return len(writers()) > 0 })
		r.srv.Enqueue(fakemodel.Answer("read only now"))
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "carry on", Permission: invoker.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		if left := writers(); len(left) > 0 {
			t.Errorf("the writer of the Unlimited turn runs on in the ReadOnly turn: %v", left)
		}
		t.Logf("turn 2: %q, sandbox %q", res.Text, res.Sandbox)
	})
}

// TestSandboxGoTool: a Go tool the run serves over loopback is reachable
// from inside the sandbox, and its result reaches the model; with Approve,
// the CLI's long-lived mode runs under it too. Codex is the exception
// docs/sandbox.md names: with Approve its app-server loads its
// instructions through its own sandbox, which cannot nest, so the thread
// does not start; that is checked to hold still.
func TestSandboxGoTool(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		if r.cli.name == "codex" {
			req := r.sandboxed("record it", invoker.ReadOnly)
			var rec recorder
			req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
			var a approvals
			req.Approve = a.decide(invoker.Decision{Allow: true})
			_, err := r.invoke(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "bwrap") {
				t.Errorf("Invoke() error = %v, want Codex's thread refused by its own sandbox (bwrap): update docs/sandbox.md", err)
			}
			return
		}
		w := twoWayOf(t, r.cli.name)
		var rec recorder
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "from the sandbox"}), fakemodel.EchoToolResult("after: "))
		req := r.sandboxed("record it", invoker.ReadOnly)
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
		var a approvals
		req.Approve = a.decide(invoker.Decision{Allow: true})
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if seen := rec.texts(); len(seen) != 1 || seen[0] != "from the sandbox" {
			t.Errorf("the handler saw %q, want the model's arguments once", seen)
		}
		if body := lastScripted(t, r.srv); !strings.Contains(body, "recorded: from the sandbox") {
			t.Errorf("the model's next request lacks the tool's result:\n%s", body)
		}
		if res.Sandbox != "filesystem" {
			t.Errorf("Result.Sandbox = %q, want filesystem", res.Sandbox)
		}
	})
}

// TestSandboxPrivateTemp: at Unlimited under the sandbox, where each CLI
// runs the model's shell commands unasked, a command reads a secret the
// host left in /tmp and writes /tmp and /dev/shm: nothing of it reaches
// the host. As root, where the run has a /tmp and a /dev/shm of its own,
// the writes succeed inside the run and the host's file is not there to
// read: the secret never reaches the model. (The CLI's settings files,
// held read-only below Unlimited, are refused at those levels by the
// CLIs and the library's rules first: TestSandboxSettingsHeld in
// invoker/driver shows the kernel's hold. Codex's commands cannot run
// inside the sandbox: TestSandboxOneShotConfigWrites.)
func TestSandboxPrivateTemp(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		const secret = "HOST-TMP-SECRET-5a4b3c"
		name := "clinvoke-e2e-private-" + filepath.Base(filepath.Dir(r.workdir))
		tmp, shm, host := "/tmp/"+name, "/dev/shm/"+name, "/tmp/"+name+"-host"
		t.Cleanup(func() { os.Remove(tmp); os.Remove(shm); os.Remove(host) })
		if err := os.WriteFile(host, []byte(secret+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r.srv.Enqueue(fakemodel.Shell(fmt.Sprintf("cat %s; echo in-tmp > %s && cat %s; echo in-shm > %s && cat %s", host, tmp, tmp, shm, shm)),
			fakemodel.EchoToolResult("after: "))
		var out strings.Builder
		req := r.sandboxed("keep scratch files", invoker.Unlimited)
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindToolResult && ev.Tool != nil {
				out.WriteString(ev.Tool.Output)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		t.Logf("the command's output: %.300s", out.String())
		for _, p := range []string{tmp, shm} {
			if b, err := os.ReadFile(p); err == nil {
				t.Errorf("%s reached the host: %q", p, b)
			}
		}
		if sandbox.ProbePrivate() != nil {
			return // a user's run reads the host's /tmp, and cannot write it
		}
		for _, q := range r.srv.Requests() {
			if q.Contains(secret) {
				t.Errorf("the host's file in /tmp reached the model")
				break
			}
		}
		if r.cli.name == "codex" {
			return
		}
		for _, want := range []string{"in-tmp", "in-shm"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the command's output %q does not hold %q: the run's own /tmp and /dev/shm must be writable", out.String(), want)
			}
		}
	})
}
