//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
