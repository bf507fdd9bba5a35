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

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// TestSandboxACPCodexLegacyLandlock: codex-acp 0.16.0 (Codex 0.137.0)
// with its configuration's features.use_legacy_landlock runs its
// commands in its own Landlock and seccomp sandbox, which nests inside
// the kernel's where its bubblewrap cannot ("bwrap: setting up uid map:
// Permission denied"). In its read-only mode a command runs; its write
// to an existing directory of the project is refused at the kernel's
// WorkspaceWrite, which allows it, and a key the kernel's sandbox hides
// stays unread though Codex's read-only reads everywhere (the two
// ceilings intersect); its seccomp refuses a connection to the fake model
// on the loopback, which full-access reaches under the kernel's sandbox.
// Its auto mode (workspace-write) gets no sandbox from that pipeline:
// every command fails (docs/sandbox.md).
func TestSandboxACPCodexLegacyLandlock(t *testing.T) {
	tests := []struct {
		name  string
		perm  invoker.Permission
		mode  string
		ran   bool   // the command ran
		wrote bool   // its write inside the project was made
		curl  string // curl's exit status, reaching the fake model
		fails string // the command's output instead, when it cannot run
	}{
		{name: "read-only at ReadOnly", perm: invoker.ReadOnly, mode: "read-only", ran: true, curl: "7"},
		{name: "read-only at WorkspaceWrite", perm: invoker.WorkspaceWrite, mode: "read-only", ran: true, curl: "7"},
		{name: "auto at WorkspaceWrite", perm: invoker.WorkspaceWrite, mode: "auto",
			fails: "permission profiles requiring direct runtime enforcement are incompatible with --use-legacy-landlock"},
		// full-access cannot be set below Unlimited under the kernel's
		// sandbox: it writes config.toml, held read-only there.
		{name: "full-access at Unlimited", perm: invoker.Unlimited, mode: "full-access", ran: true, wrote: true, curl: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachRig(t, []cli{*acpNamed("codex-acp")}, func(t *testing.T, r *rig) {
				config := filepath.Join(r.home, ".codex", "config.toml")
				b, err := os.ReadFile(config)
				if err != nil {
					t.Fatal(err)
				}
				// The file ends in its [features] table. The project is
				// trusted ahead: auto and full-access write its trust to
				// config.toml, which the kernel's sandbox holds read-only.
				writeFile(t, config, string(b)+"use_legacy_landlock = true\n\n"+
					fmt.Sprintf("[projects.%q]\ntrust_level = \"trusted\"\n", r.workdir))
				r.inv = acp.New(acp.Agent{Name: "codex-acp", Command: []string{"codex-acp"},
					Modes: map[invoker.Permission]string{tc.perm: tc.mode}}, r.opts)
				// An existing directory: nothing new is made at the top of
				// the project at WorkspaceWrite.
				if err := os.Mkdir(filepath.Join(r.workdir, "src"), 0o755); err != nil {
					t.Fatal(err)
				}
				const secret = "SECRET-KEY-5b1e0c"
				key := plantKey(t, r.home, secret)
				r.srv.Enqueue(fakemodel.Shell("echo ran; cat "+key+"; touch src/inside.txt; curl -sS -m 10 -o /dev/null "+r.srv.OpenAIBaseURL()+"/models; echo curl=$?"),
					fakemodel.EchoToolResult("after: "))
				req := r.sandboxed("run it", tc.perm)
				res, err := r.invoke(context.Background(), req)
				if err != nil {
					t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
				}
				t.Logf("answer: %.600s", res.Text)
				if res.Sandbox != "filesystem" {
					t.Errorf("Result.Sandbox = %q, want filesystem", res.Sandbox)
				}
				if got := strings.Contains(res.Text, "ran\n"); got != tc.ran {
					t.Errorf("the command ran: %v, want %v", got, tc.ran)
				}
				if tc.fails != "" && !strings.Contains(res.Text, tc.fails) {
					t.Errorf("the command's output lacks %q", tc.fails)
				}
				if tc.curl != "" && !strings.Contains(res.Text, "curl="+tc.curl+"\n") {
					t.Errorf("curl to the fake model did not exit %s", tc.curl)
				}
				if strings.Contains(res.Text, secret) {
					t.Errorf("the command read the key hidden by the kernel's sandbox")
				}
				neverSent(t, r.srv, secret)
				_, err = os.Stat(filepath.Join(r.workdir, "src", "inside.txt"))
				if wrote := err == nil; wrote != tc.wrote {
					t.Errorf("inside.txt written: %v, want %v", wrote, tc.wrote)
				}
			})
		})
	}
}

// codexACPSandboxOff turns codex-acp's own sandbox off with approvals
// (a TOML value of approval_policy): Codex's danger-full-access, set when
// the session opens, so that no mode is set after.
func codexACPSandboxOff(approvals string) []string {
	return []string{"-c", `sandbox_mode="danger-full-access"`, "-c", "approval_policy=" + approvals}
}

// TestSandboxACPCodexSandboxOff: codex-acp 0.16.0 with Agent.SandboxOff
// (Codex's danger-full-access and an approval policy, by -c) runs at
// WorkspaceWrite (and ReadOnly, where the kernel refuses its writes) under
// the kernel's sandbox, with the e2e's modes, whose
// auto would fail there (it writes the project's trust to config.toml,
// held read-only). The engine gives it the network rules "none". Under
// "never" nothing is asked: its patch and its command write in the
// project, the command's write outside it is refused by the kernel, its
// curl by the proxy. Under "untrusted" with an Approve callback, the
// patch goes to the callback and the command is declined by the level
// without asking (execute is Unlimited's). config.toml stays as it was
// (docs/acp-agents.md).
func TestSandboxACPCodexSandboxOff(t *testing.T) {
	tests := []struct {
		name      string
		perm      invoker.Permission
		approvals string   // approval_policy
		approve   bool     // the request has an Approve callback allowing everything
		ran       bool     // the command ran
		wrote     bool     // the patch and the command's write were made in the project
		cancelled bool     // codex-acp ends the turn as cancelled
		asked     []string // the kinds the callback is asked about
	}{
		{name: "never", perm: invoker.WorkspaceWrite, approvals: `"never"`, ran: true, wrote: true},
		{name: "never at ReadOnly", perm: invoker.ReadOnly, approvals: `"never"`, ran: true},
		{name: "untrusted with Approve", perm: invoker.WorkspaceWrite, approvals: `"untrusted"`, approve: true, wrote: true,
			cancelled: true, asked: []string{"file_change"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachRig(t, []cli{*acpNamed("codex-acp")}, func(t *testing.T, r *rig) {
				config := filepath.Join(r.home, ".codex", "config.toml")
				before, err := os.ReadFile(config)
				if err != nil {
					t.Fatal(err)
				}
				r.inv = acp.New(acp.Agent{Name: "codex-acp", Command: []string{"codex-acp"},
					Modes: map[invoker.Permission]string{invoker.ReadOnly: "read-only", invoker.WorkspaceWrite: "auto",
						invoker.Unlimited: "full-access"},
					SandboxOff: codexACPSandboxOff(tc.approvals)}, r.opts)
				// An existing directory: nothing new is made at the top of
				// the project at WorkspaceWrite.
				if err := os.Mkdir(filepath.Join(r.workdir, "src"), 0o755); err != nil {
					t.Fatal(err)
				}
				// A directory anyone may write, outside the project and
				// outside /tmp (the run has its own).
				dir, err := os.MkdirTemp("/var/tmp", "clinvoke-e2e-outside-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				if err := os.Chmod(dir, 0o777); err != nil {
					t.Fatal(err)
				}
				outside := filepath.Join(dir, "outside.txt")
				patched := filepath.Join(r.workdir, "src", "patched.txt")
				r.srv.Enqueue(twoWayOf(t, "codex").write(patched, "by patch"),
					fakemodel.Shell("echo ran; touch src/inside.txt; touch "+outside+"; echo outside=$?; "+
						"curl -sS -m 30 http://denied.test/probe"),
					fakemodel.EchoToolResult("after: "))
				req := r.sandboxed("run it", tc.perm)
				var a approvals
				if tc.approve {
					req.Approve = a.decide(invoker.Decision{Allow: true})
				}
				req.OnEvent = func(ev invoker.Event) {
					if ev.Kind == invoker.KindWarning {
						t.Logf("warning: %s", ev.Text)
					}
				}
				res, err := r.invoke(context.Background(), req)
				switch {
				case tc.cancelled && (err == nil || !strings.Contains(err.Error(), "cancelled")):
					t.Errorf("Invoke() error = %v, want the turn cancelled by codex-acp", err)
				case !tc.cancelled && err != nil:
					t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
				}
				t.Logf("answer: %.600s", res.Text)
				if res.Sandbox != "filesystem,network" {
					t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
				}
				b, err := os.ReadFile(patched)
				if patchedOK := err == nil && strings.Contains(string(b), "by patch"); patchedOK != tc.wrote {
					t.Errorf("the patch inside the project: %q, %v; want it made: %v", b, err, tc.wrote)
				}
				if got := strings.Contains(res.Text, "ran\n"); got != tc.ran {
					t.Errorf("the command ran: %v, want %v", got, tc.ran)
				}
				if tc.ran {
					if _, err := os.Stat(filepath.Join(r.workdir, "src", "inside.txt")); (err == nil) != tc.wrote {
						t.Errorf("the command's write inside the project: %v, want it made: %v", err, tc.wrote)
					}
					if !strings.Contains(res.Text, "outside=1\n") {
						t.Errorf("the touch outside the project did not fail")
					}
					if !strings.Contains(res.Text, "denied.test:80 denied") {
						t.Errorf("the proxy did not refuse curl to denied.test")
					}
				}
				absent(t, outside, "the write outside the project happened")
				if after, _ := os.ReadFile(config); string(after) != string(before) {
					t.Errorf("config.toml changed: %q, want %q", after, before)
				}
				var kinds []string
				for _, ap := range a.list() {
					t.Logf("asked: %s %q %v", ap.Kind, ap.Command, ap.Paths)
					kinds = append(kinds, ap.Kind)
				}
				if !slices.Equal(kinds, tc.asked) {
					t.Errorf("Approve was asked about %q, want %q", kinds, tc.asked)
				}
			})
		})
	}
}

// acpNamed returns the description of the ACP agent named name in
// acpAgents.
func acpNamed(name string) *cli {
	for i := range acpAgents {
		if acpAgents[i].name == name {
			return &acpAgents[i]
		}
	}
	panic("e2e: no ACP agent " + name)
}
