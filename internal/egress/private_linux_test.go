package egress

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
)

// requireWrapLandlock skips t where the host has no Landlock or no
// unprivileged user namespace for WrapPrivate.
func requireWrapLandlock(t *testing.T) {
	t.Helper()
	if _, err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	if err := ProbeWrap(); err != nil {
		t.Skipf("this host gives no unprivileged user namespace: %v", err)
	}
}

// wrapRig returns p's ruleset and its file, closed at t's end, and a Net
// to wrap a command with, for the caller to close (before its goroutines
// are checked).
func wrapRig(t *testing.T, p sandbox.Policy) (*sandbox.Ruleset, *os.File, *Net) {
	t.Helper()
	rs, err := sandbox.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	ruleset, err := rs.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ruleset.Close() })
	n, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs, ruleset, n
}

// TestSandboxNetPrivateWhy: where the first stage of WrapPrivate cannot
// give the run its private /tmp and /dev/shm (here: the descriptor it is
// given is no Landlock ruleset), the host learns why, not only that.
func TestSandboxNetPrivateWhy(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	n, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	notRuleset, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer notRuleset.Close()
	cmd := exec.Command("/bin/true")
	if err := n.WrapPrivate(cmd, notRuleset, []byte(`{"binds":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := n.Started()
	// The stage then fails to apply the ruleset and exits 127.
	if err := cmd.Wait(); err == nil {
		t.Error("the command ran without its ruleset")
	}
	if serr != nil {
		t.Fatal(serr)
	}
	held, why := n.PrivateHeld(), n.PrivateWhy()
	if held || !strings.Contains(why, "landlock_add_rule") {
		t.Errorf("PrivateHeld() = %v, PrivateWhy() = %q; want false and the first stage's reason", held, why)
	}
	t.Logf("the first stage's reason: %s", why)
}

// TestSandboxNetPrivateLargePlan: a plan beyond what one string of the
// environment may hold (128 KiB: thousands of files named beneath /tmp)
// reaches the first stage, which binds every file back.
func TestSandboxNetPrivateLargePlan(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	work := t.TempDir()
	dir, err := os.MkdirTemp("/tmp", "clinvoke-many-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var named []string
	for i := range 2000 {
		f := filepath.Join(dir, fmt.Sprintf("file-%04d-%s", i, strings.Repeat("x", 40)))
		if err := os.WriteFile(f, []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		named = append(named, "--file="+f)
	}
	rs, ruleset, n := wrapRig(t, sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: work, Private: true, Named: named})
	defer n.Close()
	plan := rs.PrivatePlan()
	if len(plan) <= 128<<10 {
		t.Fatalf("the plan holds %d bytes; want more than 128 KiB", len(plan))
	}
	last := strings.TrimPrefix(named[len(named)-1], "--file=")
	cmd := exec.Command("/bin/cat", last)
	cmd.Dir = "/" // not the test's own, which may lie beneath /tmp
	if err := n.WrapPrivate(cmd, ruleset, plan); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := n.Started()
	werr := cmd.Wait()
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, stderr.String())
	}
	if !n.PrivateHeld() || out.String() != "1999" {
		t.Errorf("PrivateHeld() = %v (%s), the last file read %q; want true and %q", n.PrivateHeld(), n.PrivateWhy(), out.String(), "1999")
	}
}

// TestSandboxNetPrivateSkipped: a link on the way to a settings file that
// the first stage of WrapPrivate cannot hold (in a directory its user
// namespace may not search: mode 0, or for root owned by a user the
// namespace does not map) is sent back with the listeners, the private
// roots standing.
func TestSandboxNetPrivateSkipped(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	locked := stagetest.Unsearchable(t, "config.toml", "")
	work := t.TempDir()
	_, ruleset, n := wrapRig(t, sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: work})
	defer n.Close()
	cmd := exec.Command("/bin/true")
	cmd.Dir = "/" // not the test's own, which may lie beneath /tmp
	if err := n.WrapPrivate(cmd, ruleset, []byte(`{"binds":[],"links":["`+locked+`"]}`)); err != nil {
		t.Fatal(err)
	}
	if serr, werr, out := stagetest.Run(t, n, cmd, nil); serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if got := n.PrivateSkipped(); !n.PrivateHeld() || len(got) != 1 || !strings.Contains(got[0], locked) {
		t.Errorf("PrivateHeld() = %v (%s), PrivateSkipped() = %q; want true and %s", n.PrivateHeld(), n.PrivateWhy(), got, locked)
	}
}

// TestSandboxNetPrivateNamespaceHeld: the first stage of WrapPrivate sends
// the host the mount namespace the run runs in, which the host holds after
// the run exited and which no file of the host refers to once released.
func TestSandboxNetPrivateNamespaceHeld(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	work := t.TempDir()
	rs, ruleset, n := wrapRig(t, sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: work, Private: true})
	defer n.Close()
	cmd := exec.Command("/bin/readlink", "/proc/self/ns/mnt")
	cmd.Dir = "/" // not the test's own, which may lie beneath /tmp
	if err := n.WrapPrivate(cmd, ruleset, rs.PrivatePlan()); err != nil {
		t.Fatal(err)
	}
	if serr, werr, out := stagetest.Run(t, n, cmd, nil); serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	} else if ns := n.MountNamespace(); ns == nil {
		t.Fatalf("MountNamespace() = nil (private roots held: %v, %s), want the run's mount namespace", n.PrivateHeld(), n.PrivateWhy())
	} else {
		stagetest.CheckHeld(t, ns, out)
	}
}

// wrapRun starts cmd by WrapPrivate under the ruleset of p (with its
// plan), or by Wrap alone where p has no Workdir, after edit (if not nil)
// changed the command prepared, and returns what Started returned, the
// command's end and its output.
func wrapRun(t *testing.T, p sandbox.Policy, cmd *exec.Cmd, edit func(*exec.Cmd)) (serr, werr error, out string) {
	t.Helper()
	var n *Net
	var err error
	if p.Workdir == "" {
		if n, err = New(nil); err == nil {
			err = n.Wrap(cmd)
		}
	} else {
		var rs *sandbox.Ruleset
		var ruleset *os.File
		rs, ruleset, n = wrapRig(t, p)
		if cmd.Dir == "" {
			// The test's own directory may lie beneath /tmp, which the
			// private roots cover.
			cmd.Dir = p.Workdir
		}
		err = n.WrapPrivate(cmd, ruleset, rs.PrivatePlan())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	return stagetest.Run(t, n, cmd, edit)
}

// TestSandboxNetStageSpec: the first stage runs the host's spec alone: a
// spec in the command's own environment is dropped, and a stage that ran
// another (without the host's nonce) has its message refused.
func TestSandboxNetStageSpec(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	work := stagetest.OutsideTmp(t)
	p := sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: t.TempDir(), Private: true}
	cmd := exec.Command("/bin/sh", "-c", "echo x > "+work+"/new.txt")
	forged := sandbox.StageVar + `={"FD":3,"Path":"/bin/sh","Ruleset":0,"Net":true}`
	cmd.Env = []string{forged, sandbox.StageVar + `={"FD":3}`, "PATH=/usr/bin:/bin"}
	serr, werr, out := wrapRun(t, p, cmd, nil)
	if serr != nil {
		t.Fatalf("Started: %v\n%s", serr, out)
	}
	if werr == nil || !strings.Contains(out, "ermission denied") {
		t.Errorf("the write at ReadOnly: %v %q, want it refused", werr, out)
	}
	if _, err := os.Lstat(work + "/new.txt"); err == nil {
		t.Errorf("%s/new.txt was written through a forged spec", work)
	}
	serr, _, out = wrapRun(t, p, exec.Command("/bin/true"), func(cmd *exec.Cmd) {
		last := &cmd.Env[len(cmd.Env)-1]
		*last = strings.Replace(*last, `"Nonce":"`, `"Nonce":"X`, 1)
	})
	var se *sandbox.StageSpecError
	if !errors.As(serr, &se) {
		t.Errorf("Started = %v (%s), want a *sandbox.StageSpecError", serr, out)
	}
}

// TestSandboxNetStageWorkdirBeneathTmp: a working directory beneath /tmp
// is entered again once the private roots are made: a relative write to
// a held name meets the read-only bind, not the host's directory.
func TestSandboxNetStageWorkdirBeneathTmp(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	work := heldWorkdir(t)
	p := sandbox.Policy{Level: sandbox.WorkspaceWrite, Workdir: work, Held: []string{"AGENTS.md"}, Temp: t.TempDir(), Private: true}
	cmd := exec.Command("/bin/sh", "-c", "echo x > AGENTS.md")
	cmd.Dir = work
	serr, werr, out := wrapRun(t, p, cmd, nil)
	if serr != nil {
		t.Fatalf("Started: %v\n%s", serr, out)
	}
	if werr == nil || !strings.Contains(out, "ead-only file system") {
		t.Errorf("the relative write to a held name: %v %q, want read-only file system", werr, out)
	}
	if b, _ := os.ReadFile(work + "/AGENTS.md"); string(b) != "be kind" {
		t.Errorf("AGENTS.md = %q, want it untouched", b)
	}
}

// TestSandboxNetStageNoNewPrivs: a run under network rules alone (no
// ruleset) runs under no_new_privs all the same, so that no program with
// file capabilities regains any in the run's user namespace.
func TestSandboxNetStageNoNewPrivs(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	serr, werr, out := wrapRun(t, sandbox.Policy{}, exec.Command("/bin/cat", "/proc/self/status"), nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if !strings.Contains(out, "\nNoNewPrivs:\t1\n") {
		t.Errorf("the run's status:\n%s\nwant NoNewPrivs 1", out)
	}
}

// TestSandboxNetStageRootMountSetattr: as root, a run born by the first
// stage holds no CAP_SYS_ADMIN over its own mount namespace, so
// mount_setattr(2), which Landlock does not refuse, cannot make a held
// bind writable (here the working directory beneath /tmp, bound back
// read-only: its one entry is a held name).
func TestSandboxNetStageRootMountSetattr(t *testing.T) {
	defer goleak.VerifyNone(t)
	if os.Getuid() != 0 {
		t.Skip("a user's first stage drops every capability")
	}
	requireWrapLandlock(t)
	work := heldWorkdir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.Policy{Level: sandbox.WorkspaceWrite, Workdir: work, Held: []string{"AGENTS.md"}, Temp: t.TempDir(), Private: true, Named: []string{exe}}
	serr, werr, out := wrapRun(t, p, helperCmd("mountsetattr", work), nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if !strings.Contains(out, "mount_setattr: operation not permitted") {
		t.Errorf("the run said %q, want mount_setattr refused (EPERM)", out)
	}
}

// heldWorkdir returns a new working directory beneath /tmp (else t is
// skipped) whose one entry, AGENTS.md, is a held name; removed at t's end.
func heldWorkdir(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	if !strings.HasPrefix(work, "/tmp/") {
		t.Skipf("the test's directory %s is not beneath /tmp", work)
	}
	if err := os.WriteFile(work+"/AGENTS.md", []byte("be kind"), 0o644); err != nil {
		t.Fatal(err)
	}
	return work
}
