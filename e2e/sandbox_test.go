//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
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
			if want := heldFor(r.cli.name); res.Text != "sandboxed answer" || res.Sandbox != want {
				t.Errorf("%s: Text %q, Sandbox %q; want the answer, %s", perm, res.Text, res.Sandbox, want)
			}
		}
	})
}

// heldFor returns Result.Sandbox of a run of cli below Unlimited under a
// sandbox without network rules, on a host that holds both parts: Codex,
// which runs inside with its own sandbox off, gets the rules "none"
// (docs/sandbox.md).
func heldFor(cli string) string {
	if cli == "codex" {
		return "filesystem,network"
	}
	return "filesystem"
}

// TestSandboxSSHKeyReadOnly: a key planted in ~/.ssh is not read by a
// shell command the model asks for at ReadOnly, and never reaches the
// model.
func TestSandboxSSHKeyReadOnly(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		const secret = "SECRET-KEY-0f9e8d7c"
		key := plantKey(t, r.home, secret)
		r.srv.Enqueue(fakemodel.Shell("cat "+key), fakemodel.EchoToolResult("after: "))
		res, err := r.invoke(context.Background(), r.sandboxed("show me the key", invoker.ReadOnly))
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		t.Logf("answer: %.300s", res.Text)
		if strings.Contains(res.Text, secret) {
			t.Errorf("the key reached the answer: %q", res.Text)
		}
		neverSent(t, r.srv, secret)
	})
}

// plantKey writes a private key holding secret to home's
// .ssh/id_ed25519, as a user's own would be, and returns its path.
func plantKey(t *testing.T, home, secret string) string {
	t.Helper()
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSandboxOneShotConfigWrites: the writes TestOneShotConfigWrites
// finds open with Codex at WorkspaceWrite (.gemini, .claude, .mcp.json,
// .claude.json at the top of the project), .codex and .git there, and
// /tmp, by each CLI's own write tool and by shell, are refused under the
// sandbox, while a file of the project is written and the turn goes on:
// Codex's too, which runs inside with its own sandbox off.
func TestSandboxOneShotConfigWrites(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		w := twoWayOf(t, r.cli.name)
		wd := r.workdir
		if err := os.MkdirAll(filepath.Join(wd, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		targets := []string{"/tmp/clinvoke-e2e-sandbox-" + filepath.Base(wd)}
		for _, f := range []string{".gemini/settings.json", ".claude/settings.json", ".codex/config.toml", ".mcp.json", ".claude.json", ".git/hooks/pre-commit"} {
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
		if b, err := os.ReadFile(inside); err != nil || !strings.Contains(string(b), "project file") {
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

// TestSandboxACPAnswerLevels: every ACP agent answers a turn under the
// sandbox at WorkspaceWrite and Unlimited too (ReadOnly is
// TestSandboxACPAnswer's), in the e2e's modes; codex-acp, whose modes
// below Unlimited cannot work inside the kernel's sandbox, with
// Agent.SandboxOff, as a program that runs it there sets it.
func TestSandboxACPAnswerLevels(t *testing.T) {
	forEachACP(t, func(t *testing.T, r *rig) {
		if r.cli.name == "codex-acp" {
			r.inv = acp.New(acp.Agent{Name: "codex-acp", Command: []string{"codex-acp"},
				Modes: map[invoker.Permission]string{invoker.ReadOnly: "read-only", invoker.WorkspaceWrite: "auto",
					invoker.Unlimited: "full-access"},
				SandboxOff: codexACPSandboxOff(`"never"`)}, r.opts)
		}
		for _, perm := range []invoker.Permission{invoker.WorkspaceWrite, invoker.Unlimited} {
			r.srv.Enqueue(fakemodel.Answer("sandboxed answer"))
			res, err := r.invoke(context.Background(), r.sandboxed("say hello", perm))
			if err != nil {
				t.Fatalf("%s: Invoke() error = %v; stderr tail:\n%s", perm, err, res.Stderr)
			}
			if res.Text != "sandboxed answer" || !strings.HasPrefix(res.Sandbox, "filesystem") {
				t.Errorf("%s: Text %q, Sandbox %q; want the answer, held", perm, res.Text, res.Sandbox)
			}
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
// the CLI's long-lived mode runs under it too (Codex's app-server starts
// its thread with its own sandbox off).
func TestSandboxGoTool(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
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
		if want := heldFor(r.cli.name); res.Sandbox != want {
			t.Errorf("Result.Sandbox = %q, want %s", res.Sandbox, want)
		}
	})
}

// TestSandboxCodexAvailable: Codex under the "available" form at
// WorkspaceWrite, on a host that holds the filesystem and the network,
// runs inside the sandbox with its own off and the network rules "none":
// its patch and its shell write inside the working directory; the shell's
// write to /tmp lands in the run's own /tmp (or is refused where the host
// gives no mount namespace), never the host's; its append to CODEX_HOME's
// config.toml fails (the file is bound read-only over itself); what it
// writes in $TMPDIR goes with the run; a connection elsewhere is refused
// with a warning event.
func TestSandboxCodexAvailable(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("codex")}, func(t *testing.T, r *rig) {
		w := twoWayOf(t, "codex")
		wd := r.workdir
		if err := os.MkdirAll(filepath.Join(wd, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		outside := "/tmp/clinvoke-e2e-codex-" + filepath.Base(wd)
		t.Cleanup(func() { os.Remove(outside) })
		config := filepath.Join(r.home, ".codex", "config.toml")
		before, err := os.ReadFile(config)
		if err != nil {
			t.Fatal(err)
		}
		patched, shelled, tmpdir := filepath.Join(wd, "src", "patched.txt"), filepath.Join(wd, "src", "shelled.txt"), filepath.Join(wd, "src", "tmpdir.txt")
		r.srv.Enqueue(w.write(patched, "by patch"),
			fakemodel.Shell("echo by shell > "+shelled+"; echo kept > $TMPDIR/kept; echo $TMPDIR > "+tmpdir),
			fakemodel.Shell("echo PLANTED > "+outside),
			fakemodel.Shell("echo '# PLANTED by shell' >> "+config),
			fakemodel.Shell("curl -sS -m 30 http://denied.test/probe; echo end"),
			fakemodel.EchoToolResult("after: "))
		req := r.request("work in the project")
		req.Permission, req.Sandbox = invoker.WorkspaceWrite, invoker.Sandbox{Mode: "available"}
		var warnings []string
		req.OnEvent = func(ev invoker.Event) {
			switch {
			case ev.Kind == invoker.KindWarning:
				warnings = append(warnings, ev.Text)
			case ev.Kind == invoker.KindToolResult && ev.Tool != nil:
				t.Logf("%s result (%s): %.200s", ev.Tool.Name, ev.Tool.Status, ev.Tool.Output)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if res.Sandbox != "filesystem,network" {
			t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
		}
		for f, want := range map[string]string{patched: "by patch", shelled: "by shell"} {
			if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), want) {
				t.Errorf("%s: %q, %v; want it written %s", f, b, err, want)
			}
		}
		if b, err := os.ReadFile(outside); err == nil {
			t.Errorf("%s was written: %q", outside, b)
		}
		if b, err := os.ReadFile(tmpdir); err != nil {
			t.Errorf("the shell did not record its TMPDIR: %v", err)
		} else if dir := strings.TrimSpace(string(b)); !strings.HasPrefix(dir, "/tmp/clinvoke-run-") {
			t.Errorf("TMPDIR = %q, want the run's private directory", dir)
		} else if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the run's TMPDIR %s outlived it (%v)", dir, err)
		}
		after, _ := os.ReadFile(config)
		if string(after) != string(before) {
			t.Errorf("CODEX_HOME's config.toml was written by the shell: %q, want it held read-only", after)
		}
		if !strings.Contains(res.Text, "denied.test:80 denied") {
			t.Errorf("Result.Text = %q, want the proxy's refusal of denied.test", res.Text)
		}
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "denied.test:80") }) {
			t.Errorf("warnings %q, want one naming denied.test:80", warnings)
		}
	})
}

// TestSandboxCodexApprovals: with Approve, Codex inside the sandbox with
// its own off (the approval policy "untrusted", as without the sandbox)
// still asks the program before a command at ReadOnly and WorkspaceWrite,
// and before a file change at WorkspaceWrite; a file change at ReadOnly is
// declined without asking. What the program allows, the kernel still
// holds: an approved write at ReadOnly fails.
func TestSandboxCodexApprovals(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("codex")}, func(t *testing.T, r *rig) {
		w := twoWayOf(t, "codex")
		if err := os.MkdirAll(filepath.Join(r.workdir, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, perm := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite} {
			touched, patched := filepath.Join(r.workdir, "src", "touched-"+string(perm)), filepath.Join(r.workdir, "src", "patched-"+string(perm))
			r.srv.Enqueue(fakemodel.Shell("touch "+touched), w.write(patched, "by patch"), fakemodel.EchoToolResult("after: "))
			var a approvals
			req := r.request("do it")
			req.Permission, req.Approve, req.Sandbox = perm, a.decide(invoker.Decision{Allow: true}), invoker.Sandbox{Mode: "available"}
			res, err := r.invoke(context.Background(), req)
			if err != nil {
				t.Fatalf("%s: Invoke() error = %v; stderr:\n%s", perm, err, res.Stderr)
			}
			var kinds []string
			for _, ap := range a.list() {
				kinds = append(kinds, ap.Kind)
			}
			t.Logf("%s: asked %q, Sandbox %q", perm, kinds, res.Sandbox)
			if res.Sandbox != "filesystem,network" {
				t.Errorf("%s: Result.Sandbox = %q, want filesystem,network", perm, res.Sandbox)
			}
			want := []string{invoker.ApprovalCommand}
			if perm == invoker.WorkspaceWrite {
				want = append(want, invoker.ApprovalFileChange)
			}
			if !slices.Equal(kinds, want) {
				t.Errorf("%s: the program was asked %q, want %q", perm, kinds, want)
			}
			_, errT := os.Stat(touched)
			_, errP := os.Stat(patched)
			if (perm == invoker.ReadOnly) != (errT != nil) || (perm == invoker.ReadOnly) != (errP != nil) {
				t.Errorf("%s: the command's file: %v, the patch's: %v; want both written at WorkspaceWrite only", perm, errT, errP)
			}
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
		if sandbox.ProbePrivate() != nil && sandbox.ProbeStage() != nil {
			return // a user's run without a user namespace reads the host's /tmp, and cannot write it
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

// TestSandboxSettingsNotMade: none of the CLIs makes a settings, memory
// or instruction file of its own (sandbox.Settings) in a turn whose model
// asks for a shell command, under the sandbox: the ones missing when the run starts,
// which the sandbox cannot hold, are still missing after it, and no
// warning names one. So a KindWarning saying that a run made one
// (docs/sandbox.md) means that a tool of the run made it. Nor does the
// run's end name a held name made below the top of the working directory:
// the CLIs make none there themselves.
func TestSandboxSettingsNotMade(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		var missing []string
		for _, f := range sandbox.Settings(r.cli.name, r.opts.Env, r.home) {
			if _, err := os.Lstat(f); err != nil {
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 {
			t.Fatal("the rig leaves no settings file missing: nothing to measure")
		}
		// A directory below the top, which the run's end walks.
		if err := os.MkdirAll(filepath.Join(r.workdir, "src", "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
		r.srv.Enqueue(fakemodel.Shell("echo hi"), fakemodel.EchoToolResult("after: "))
		req := r.sandboxed("say something", invoker.WorkspaceWrite)
		var warned strings.Builder
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning {
				fmt.Fprintln(&warned, ev.Text)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		for _, f := range missing {
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("%s made %s in a plain turn", r.cli.name, f)
			}
			if strings.Contains(warned.String(), f) {
				t.Errorf("a warning names %s:\n%s", f, warned.String())
			}
		}
		if strings.Contains(warned.String(), "below the working directory") {
			t.Errorf("a warning names held names made below the working directory in a plain turn:\n%s", warned.String())
		}
	})
}

// TestSandboxLinkedSettings: Gemini CLI's settings.json (which selects its
// authentication here) as a dotfiles manager leaves it, a link into a
// repository in the hidden home. With the repository in Sandbox.Show,
// Gemini CLI reads it through the link and answers; without, the sandbox
// keeps the target unreadable (a link a run planted reads nothing) and
// the run gets a warning naming the link, its target and the fix, before
// its first event. The link and its target are as they were after both.
func TestSandboxLinkedSettings(t *testing.T) {
	r := newRig(t, cliNamed("gemini"))
	link := filepath.Join(r.home, ".gemini", "settings.json")
	target := filepath.Join(r.home, "dotfiles", "gemini", "settings.json")
	body, err := os.ReadFile(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dotfiles/gemini/settings.json", link); err != nil {
		t.Fatal(err)
	}
	r.srv.Enqueue(fakemodel.Answer("linked answer"))
	req := r.sandboxed("say something", invoker.ReadOnly)
	req.Sandbox.Show = []string{filepath.Join(r.home, "dotfiles")}
	res, err := r.invoke(context.Background(), req)
	if err != nil || res.Text != "linked answer" {
		t.Fatalf("Invoke() with the dotfiles shown = %q, %v; want the answer; stderr:\n%s", res.Text, err, res.Stderr)
	}
	// Without Show: the warning, first (Gemini CLI then fails to
	// authenticate, its settings unread).
	req = r.sandboxed("say something", invoker.ReadOnly)
	var kinds []invoker.EventKind
	var warned []string
	req.OnEvent = func(ev invoker.Event) {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == invoker.KindWarning && strings.Contains(ev.Text, link) {
			warned = append(warned, ev.Text)
		}
	}
	res, err = r.invoke(context.Background(), req)
	t.Logf("without Show: exit status %d, %v", res.ExitCode, err)
	want := "add " + filepath.Dir(target) + " to Sandbox.Show"
	if len(warned) != 1 || !strings.Contains(warned[0], target) || !strings.Contains(warned[0], want) {
		t.Errorf("warnings naming %s: %q; want one naming %s and %q", link, warned, target, want)
	}
	if len(kinds) == 0 || kinds[0] != invoker.KindWarning {
		t.Errorf("events %v: want the warning first", kinds)
	}
	if l, err := os.Readlink(link); err != nil || l != "../dotfiles/gemini/settings.json" {
		t.Errorf("%s links to %q, %v; want it untouched", link, l, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != string(body) {
		t.Errorf("%s = %q, %v; want it untouched", target, b, err)
	}
}
