package driver

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxStageRefused: where a user's run cannot have a user
// namespace of its own, it keeps today's route (the forking thread
// restricted, no first stage), the host's /tmp and /dev/shm and its
// commands in the CLI's Landlock domain, and both
// Capabilities.SandboxNote and the run's reason say why. Root keeps its
// route whatever the probe says.
func TestSandboxStageRefused(t *testing.T) {
	if _, err := landlockProbe(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	const refused = "user namespaces refused here"
	saved := stageProbe
	stageProbe = func() error { return errors.New(refused) }
	t.Cleanup(func() { stageProbe = saved })
	_, note := sandboxCapabilities("")
	attr := &proc.Attr{Path: "/bin/true", Args: []string{"/bin/true"}, Env: []string{"HOME=" + t.TempDir()}}
	a := sandboxAsk{sb: invoker.Sandbox{Mode: sandboxRequired}, perm: invoker.ReadOnly, cli: "claude"}
	rs, err := a.prepare(attr, t.TempDir(), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.undo()
	if attr.Path != "/bin/true" || attr.Restrict == nil || rs.stage != nil {
		t.Errorf("Path %q, Restrict set %v, a first stage %v; want the CLI started by the restricted forking thread", attr.Path, attr.Restrict != nil, rs.stage != nil)
	}
	if sandbox.ProbePrivate() == nil {
		if !strings.Contains(note, "a mount namespace per run") {
			t.Errorf("SandboxNote = %q, want root's mount namespace", note)
		}
		return
	}
	if !strings.Contains(note, refused) || !strings.Contains(note, "/tmp and /dev/shm are not writable") || !strings.Contains(note, "share its Landlock domain") {
		t.Errorf("SandboxNote = %q, want the refusal and what it costs", note)
	}
	rs.started()
	if ok, why := rs.private(); ok || !strings.Contains(why, refused) {
		t.Errorf("private() = %v, %q; want false and the refusal", ok, why)
	}
}
