package acp_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// TestSandboxOff checks Agent.SandboxOff: where the kernel holds the run's
// filesystem and network (below Unlimited the engine gives the rules
// "none"), its arguments follow Command's and the session keeps the mode
// it opened in; elsewhere they are not passed and the level's mode is
// set.
func TestSandboxOff(t *testing.T) {
	t.Parallel()
	off := []string{"-c", `sandbox_mode="danger-full-access"`}
	if c := acp.New(acp.Agent{Command: []string{"x"}, SandboxOff: off}).Capabilities(); !strings.Contains(c.Sandbox, "network") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Capabilities.Sandbox is %q (%s): CI runs on a kernel with Landlock and network namespaces", c.Sandbox, c.SandboxNote)
		}
		t.Skipf("no network sandbox here: %s", c.SandboxNote)
	}
	modes := map[invoker.Permission]string{invoker.ReadOnly: "ro", invoker.WorkspaceWrite: "ww", invoker.Unlimited: "all"}
	for _, tc := range []struct {
		name    string
		perm    invoker.Permission
		sandbox invoker.Sandbox
		off     bool   // SandboxOff is passed
		mode    string // the session's mode in the turn
		held    string // Result.Sandbox
	}{
		{"WorkspaceWrite under the sandbox", invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required"}, true, "open", "filesystem,network"},
		{"WorkspaceWrite with rules", invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required", Network: []string{"example.com:443"}}, true, "open", "filesystem,network"},
		{"WorkspaceWrite without the sandbox", invoker.WorkspaceWrite, invoker.Sandbox{}, false, "ww", ""},
		{"Unlimited under the filesystem sandbox", invoker.Unlimited, invoker.Sandbox{Mode: "required"}, false, "all", "filesystem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The record goes to an existing directory: nothing new is
			// made at the top of the project at WorkspaceWrite.
			wd := t.TempDir()
			rd := filepath.Join(wd, "record")
			if err := os.Mkdir(rd, 0o755); err != nil {
				t.Fatal(err)
			}
			s := fakeagent.Script{RecordDir: rd, ACP: fakeagent.ACPOptions{Modes: []string{"open", "ro", "ww", "all"}, ReportState: true}}
			r := invokeWith(t, t.Context(), s, func(a *acp.Agent) { a.Modes, a.SandboxOff = modes, off }, quick,
				invoker.Request{Workdir: wd, Prompt: "state", Permission: tc.perm, Sandbox: tc.sandbox})
			if r.err != nil {
				t.Fatalf("Invoke() error = %v; stderr: %s", r.err, r.res.Stderr)
			}
			if r.res.Sandbox != tc.held {
				t.Errorf("Result.Sandbox = %q, want %q", r.res.Sandbox, tc.held)
			}
			if got, want := r.texts(invoker.KindReasoning), []string{"mode=" + tc.mode + " model="}; !slices.Equal(got, want) {
				t.Errorf("the agent reported %q, want %q", got, want)
			}
			rec, err := fakeagent.ReadRecord(rd)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"--acp"}
			if tc.off {
				want = append(want, off...)
			}
			if !slices.Equal(rec.Args, want) {
				t.Errorf("arguments %q, want %q", rec.Args, want)
			}
		})
	}
}
