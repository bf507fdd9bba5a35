package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
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
// and born by Wrap under a ruleset at ReadOnly with its private roots (the program's binary executed again, the mount
// namespace made, the ruleset applied, /bin/true executed).
func BenchmarkStage(b *testing.B) {
	requireLandlock(b)
	if err := ProbeStage(); err != nil {
		b.Skipf("no user namespace for a first stage here: %v", err)
	}
	for _, how := range []string{"direct", "userns", "stage"} {
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
				case "stage":
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
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
