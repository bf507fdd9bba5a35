package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestStagePrivateSkipped: a first stage started by Wrap makes the
// private roots of its plan in a user namespace, runs the command under
// the ruleset, and reports back a link on the way to a settings file
// that it could not hold (in a directory the namespace may not search),
// as Unheld does on the route without a user namespace.
func TestStagePrivateSkipped(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	if err := ProbeStage(); err != nil {
		t.Skipf("no user namespace for a first stage here: %v", err)
	}
	locked := unsearchable(t)
	work := t.TempDir()
	rs, err := Build(Policy{Level: ReadOnly, Workdir: work, Temp: work})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ruleset, err := rs.File()
	if err != nil {
		t.Fatal(err)
	}
	defer ruleset.Close()
	name := "/tmp/clinvoke-stage-" + filepath.Base(work)
	cmd := exec.Command("/bin/sh", "-c", "echo x > "+name+" && cat "+name)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	s, err := Wrap(cmd, ruleset, []byte(`{"binds":[],"links":["`+locked+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := s.Started()
	werr := cmd.Wait()
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, stderr.String())
	}
	if ok, why := s.Private(); !ok || out.String() != "x\n" {
		t.Errorf("Private() = %v (%s), the command read %q; want true and its own /tmp file", ok, why, out.String())
	}
	if got := s.Skipped(); len(got) != 1 || !strings.Contains(got[0], locked) {
		t.Errorf("Skipped() = %q, want %s, which the namespace may not search", got, locked)
	}
	if _, err := os.Lstat(name); err == nil {
		os.Remove(name)
		t.Errorf("%s reached the host", name)
	}
}

// TestStageNamespaceHeld: a first stage sends the host the mount
// namespace the run runs in, which the host holds after the run exited
// (its teardown off the run's exit) and which no file of the host refers
// to once released.
func TestStageNamespaceHeld(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	if err := ProbeStage(); err != nil {
		t.Skipf("no user namespace for a first stage here: %v", err)
	}
	work := t.TempDir()
	rs, err := Build(Policy{Level: ReadOnly, Workdir: work, Temp: work, Private: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ruleset, err := rs.File()
	if err != nil {
		t.Fatal(err)
	}
	defer ruleset.Close()
	cmd := exec.Command("/bin/readlink", "/proc/self/ns/mnt")
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	s, err := Wrap(cmd, ruleset, rs.PrivatePlan())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serr := s.Started()
	ns := s.Namespace()
	werr := cmd.Wait()
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, stderr.String())
	}
	if ns == nil {
		t.Fatal("Namespace() = nil, want the run's mount namespace")
	}
	if s.Namespace() != nil {
		t.Error("Namespace() handed the namespace over twice")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mnt:[%d]", st.Ino)
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("the run's mount namespace is %s, the host holds %s", got, want)
	}
	if got := filesTo(t, want); len(got) != 1 {
		t.Errorf("files of the host that refer to %s after the run: %q, want the one held", want, got)
	}
	ns.Close()
	if got := filesTo(t, want); len(got) != 0 {
		t.Errorf("files of the host that refer to %s once released: %q, want none", want, got)
	}
}

// filesTo returns this process's open files that are target (a link of
// /proc/self/fd).
func filesTo(t *testing.T, target string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == target {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// unsearchable returns a file in a directory that a user namespace of
// this process may not search: mode 0 for a user, and for root owned by
// a user the namespace does not map, mode 0700. Removed at t's end.
func unsearchable(t *testing.T) string {
	t.Helper()
	// Outside /tmp, which the run's own tmpfs covers.
	dir, err := os.MkdirTemp("/var/tmp", "clinvoke-unsearchable-")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "AGENTS.md")
	if err := os.WriteFile(f, []byte("be kind"), 0o644); err != nil {
		t.Fatal(err)
	}
	mode := os.FileMode(0)
	if os.Geteuid() == 0 {
		mode = 0o700
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700); os.RemoveAll(dir) })
	return f
}

// BenchmarkStage is the cost of a first stage: /bin/true started and
// waited for directly, in a new user namespace alone (the kernel's part),
// and born by Wrap under a ruleset at ReadOnly with its private roots (the
// program's binary executed again, the mount namespace made, the ruleset
// applied, /bin/true executed): "stage" with the run's mount namespace
// held by the host and released after the wait (off the run's exit),
// "unheld" with it released before, so that its teardown is on the exit.
// The stages' time to the wait is what a run pays.
func BenchmarkStage(b *testing.B) {
	requireLandlock(b)
	if err := ProbeStage(); err != nil {
		b.Skipf("no user namespace for a first stage here: %v", err)
	}
	for _, how := range []string{"direct", "userns", "stage", "unheld"} {
		b.Run(how, func(b *testing.B) {
			work := b.TempDir()
			rs, err := Build(Policy{Level: ReadOnly, Workdir: work, Temp: work, Private: true})
			if err != nil {
				b.Fatal(err)
			}
			defer rs.Close()
			plan := rs.PrivatePlan()
			ruleset, err := rs.File()
			if err != nil {
				b.Fatal(err)
			}
			defer ruleset.Close()
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				var s *Stage
				switch how {
				case "userns":
					cmd.SysProcAttr = &syscall.SysProcAttr{}
					UserNSAttr(cmd.SysProcAttr)
				case "stage", "unheld":
					if s, err = Wrap(cmd, ruleset, plan); err != nil {
						b.Fatal(err)
					}
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if s != nil {
					if err := s.Started(); err != nil {
						b.Fatal(err)
					}
					if ok, why := s.Private(); !ok {
						b.Fatalf("Private() = false: %s", why)
					}
				}
				var ns *os.File
				if how == "stage" {
					ns = s.Namespace()
				} else if s != nil {
					s.Close()
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				if ns != nil {
					go ns.Close()
				}
			}
		})
	}
}
