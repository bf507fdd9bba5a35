package egress

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/sandbox"
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
	dir, err := os.MkdirTemp("/var/tmp", "clinvoke-unsearchable-") // outside the private /tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700); os.RemoveAll(dir) })
	locked := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(locked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	_, ruleset, n := wrapRig(t, sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: work})
	defer n.Close()
	cmd := exec.Command("/bin/true")
	if err := n.WrapPrivate(cmd, ruleset, []byte(`{"binds":[],"links":["`+locked+`"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := n.Started()
	if werr := cmd.Wait(); serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v", serr, werr)
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
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := n.WrapPrivate(cmd, ruleset, rs.PrivatePlan()); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := n.Started()
	if werr := cmd.Wait(); serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, stderr.String())
	}
	ns := n.MountNamespace()
	if ns == nil {
		t.Fatalf("MountNamespace() = nil (private roots held: %v, %s), want the run's mount namespace", n.PrivateHeld(), n.PrivateWhy())
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mnt:[%d]", st.Ino)
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("the run's mount namespace is %s, the host holds %s", got, want)
	}
	held := func() (n int) {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == want {
				n++
			}
		}
		return n
	}
	if got := held(); got != 1 {
		t.Errorf("%d files of the host refer to %s after the run, want the one held", got, want)
	}
	ns.Close()
	if got := held(); got != 0 {
		t.Errorf("%d files of the host refer to %s once released, want none", got, want)
	}
}
