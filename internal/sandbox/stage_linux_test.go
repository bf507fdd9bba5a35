package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
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
	locked := stagetest.Unsearchable(t, "AGENTS.md", "be kind")
	work := t.TempDir()
	_, ruleset := built(t, Policy{Level: ReadOnly, Workdir: work, Temp: work})
	name := "/tmp/clinvoke-stage-" + filepath.Base(work)
	cmd := exec.Command("/bin/sh", "-c", "echo x > "+name+" && cat "+name)
	cmd.Dir = "/" // not the test's own, which may lie beneath /tmp
	s, err := Wrap(cmd, ruleset, []byte(`{"binds":[],"links":["`+locked+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	serr, werr, out := stagetest.Run(t, s, cmd, nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if ok, why := s.Private(); !ok || out != "x\n" {
		t.Errorf("Private() = %v (%s), the command read %q; want true and its own /tmp file", ok, why, out)
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
	rs, ruleset := built(t, Policy{Level: ReadOnly, Workdir: work, Temp: work, Private: true})
	cmd := exec.Command("/bin/readlink", "/proc/self/ns/mnt")
	cmd.Dir = "/" // not the test's own, which may lie beneath /tmp
	s, err := Wrap(cmd, ruleset, rs.PrivatePlan())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ns *os.File
	serr, werr, out := stagetest.Run(t, stagetest.StartedFunc(func() error {
		err := s.Started()
		ns = s.Namespace()
		return err
	}), cmd, nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if ns == nil {
		t.Fatal("Namespace() = nil, want the run's mount namespace")
	}
	if s.Namespace() != nil {
		t.Error("Namespace() handed the namespace over twice")
	}
	stagetest.CheckHeld(t, ns, out)
}

// BenchmarkStage is the cost of a first stage: /bin/true started and
// waited for directly, in a new user namespace alone (the kernel's part),
// and born by Wrap under a ruleset at ReadOnly with its private roots (the
// program's binary executed again, the mount namespace made, the ruleset
// applied, /bin/true executed): "stage" with the run's mount namespace
// held by the host and released after the wait (off the run's exit),
// "unheld" with it released before, so that its teardown is on the exit.
// The stages' time to the wait is what a run pays. With
// CLINVOKE_BENCH_STAGE_HOST set to a program's binary built from this
// module (examples/demo), that binary runs the stages, not the test's:
// its runtime and package initialisers are what a program's stage pays.
// cpu-ns/op is the CPU time of the started process (the stage and
// /bin/true), which other work on the machine inflates less than the
// time to the wait.
func BenchmarkStage(b *testing.B) {
	host := os.Getenv("CLINVOKE_BENCH_STAGE_HOST")
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
			var cpu time.Duration
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
					if host != "" {
						cmd.Path = host
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
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				if ns != nil {
					go ns.Close()
				}
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// stageRun starts cmd by Wrap under a ruleset of p (and its private
// roots, with p.Private), after edit (if not nil) changed the command Wrap
// prepared, and returns what Started returned, the command's end and its
// output.
func stageRun(t *testing.T, p Policy, cmd *exec.Cmd, edit func(*exec.Cmd)) (serr, werr error, out string) {
	t.Helper()
	rs, ruleset := built(t, p)
	if cmd.Dir == "" {
		// The test's own directory may lie beneath /tmp, which the
		// private roots cover.
		cmd.Dir = p.Workdir
	}
	s, err := Wrap(cmd, ruleset, rs.PrivatePlan())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return stagetest.Run(t, s, cmd, edit)
}

// built returns the ruleset of p and its file, both closed at t's end.
func built(t *testing.T, p Policy) (*Ruleset, *os.File) {
	t.Helper()
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	ruleset, err := rs.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ruleset.Close() })
	return rs, ruleset
}

func requireStage(t *testing.T) {
	t.Helper()
	requireLandlock(t)
	if err := ProbeStage(); err != nil {
		t.Skipf("no user namespace for a first stage here: %v", err)
	}
}

// TestStageSpecFromEnvIgnored: a first stage's spec in the command's own
// environment (the caller's, set before Wrap's) is dropped: the stage runs
// the host's spec, and the ceiling holds.
func TestStageSpecFromEnvIgnored(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	work := outsideTmpDir(t)
	forged := stageEnv + `={"FD":3,"Path":"/bin/sh","Ruleset":0}`
	cmd := exec.Command("/bin/sh", "-c", "echo x > "+work+"/new.txt")
	cmd.Env = []string{forged, stageEnv + `={"FD":3,"Net":true}`, "PATH=/usr/bin:/bin", forged}
	serr, werr, out := stageRun(t, Policy{Level: ReadOnly, Workdir: work, Temp: work + "/t"}, cmd, func(cmd *exec.Cmd) {
		n := 0
		for _, kv := range cmd.Env {
			if k, _, _ := strings.Cut(kv, "="); k == stageEnv {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the command's environment holds %d specs of a stage, want the host's alone: %q", n, cmd.Env)
		}
	})
	if serr != nil {
		t.Fatalf("Started: %v\n%s", serr, out)
	}
	if werr == nil || !strings.Contains(out, "ermission denied") {
		t.Errorf("the write at ReadOnly: %v %q, want it refused", werr, out)
	}
	if _, err := os.Lstat(work + "/new.txt"); err == nil {
		t.Errorf("%s/new.txt was written through a forged spec", work)
	}
}

// TestStageForeignSpecVoid: a first stage that ran a spec other than its
// host's (without the host's nonce) has its report refused, as a
// *StageSpecError, and the stage refuses a spec that asks for a ruleset
// but names none.
func TestStageForeignSpecVoid(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	work := outsideTmpDir(t)
	for name, spec := range map[string]string{
		"no nonce":      `{"FD":3,"Path":"/bin/true","Ruleset":4,"Restricted":true}`,
		"no ruleset":    `{"FD":3,"Path":"/bin/true","Ruleset":0,"Restricted":true}`,
		"another nonce": `{"FD":3,"Path":"/bin/true","Ruleset":4,"Restricted":true,"Nonce":"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"}`,
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("/bin/true")
			serr, werr, out := stageRun(t, Policy{Level: ReadOnly, Workdir: work, Temp: work + "/t"}, cmd, func(cmd *exec.Cmd) {
				cmd.Env[len(cmd.Env)-1] = stageEnv + "=" + spec
			})
			var se *StageSpecError
			if serr == nil || (name != "no ruleset" && !errors.As(serr, &se)) {
				t.Errorf("Started = %v, want the report refused", serr)
			}
			if name == "no ruleset" && !strings.Contains(out, "names none") {
				t.Errorf("the stage said %q (%v), want its refusal", out, werr)
			}
		})
	}
}

// TestStageRootCaps: as root, a run born by a first stage holds none of
// EscapeCaps, in its effective and bounding sets alike, and runs under
// no_new_privs; so mount_setattr cannot make a held bind writable.
func TestStageRootCaps(t *testing.T) {
	defer goleak.VerifyNone(t)
	if os.Getuid() != 0 {
		t.Skip("a user's first stage drops every capability (the other route)")
	}
	requireStage(t)
	work := outsideTmpDir(t)
	cmd := exec.Command("/bin/cat", "/proc/self/status")
	serr, werr, out := stageRun(t, Policy{Level: WorkspaceWrite, Workdir: work, Temp: work + "/t", Private: true}, cmd, nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	fields := stagetest.CheckCaps(t, out, append(slices.Clone(EscapeCaps), unix.CAP_NET_RAW), unix.CAP_DAC_OVERRIDE)
	if fields["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %q, want 1", fields["NoNewPrivs"])
	}
}

// TestStageProbeRetriesPassing: the probe's answer is kept once it is a
// success or a lasting refusal; a passing failure is asked again.
func TestStageProbeRetriesPassing(t *testing.T) {
	answers := []error{fmt.Errorf("start: %w", unix.ENOSPC), nil, unix.EPERM}
	calls := 0
	o := lastingOnce{f: func() error { calls++; return answers[calls-1] }}
	if err := o.get(); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("first = %v, want ENOSPC", err)
	}
	for range 2 {
		if err := o.get(); err != nil {
			t.Fatalf("later = %v, want nil", err)
		}
	}
	if calls != 2 {
		t.Errorf("%d calls, want 2: the success kept", calls)
	}
	calls, answers = 0, []error{fmt.Errorf("start: %w", unix.EPERM)}
	o = lastingOnce{f: func() error { calls++; return answers[0] }}
	o.get()
	if err := o.get(); !errors.Is(err, unix.EPERM) || calls != 1 {
		t.Errorf("after EPERM: %v after %d calls, want EPERM kept after 1", err, calls)
	}
}

// outsideTmpDir returns a new directory outside /tmp (which a first
// stage's private roots cover), holding an empty t for a run's own
// temporary directory, removed at t's end.
func outsideTmpDir(t *testing.T) string {
	t.Helper()
	dir := stagetest.OutsideTmp(t)
	if err := os.Mkdir(dir+"/t", 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStageHeldNames: by a first stage (a user's route), a run's writes
// to two held names of its working directory are refused (read-only file
// system) and its write beside them is not:
//   - "workdir beneath /tmp": a working directory beneath /tmp is entered
//     again once the private roots are made, so that a relative write to
//     a held name meets the read-only bind, not the host's directory
//     beneath the new tmpfs;
//   - "link": a held name that is a symbolic link to a file in the
//     working directory is held with the file it ends at, so that a write
//     through the link and one to the target's own path are refused;
//   - "nested": held names below the top (a nested repository's .git, a
//     subdirectory's .claude) are bound read-only as well.
func TestStageHeldNames(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, work string)
		writes  string // the command's two writes to held names
		refused string // what they are, for the error
		check   func(t *testing.T, work string)
	}{
		{
			name: "workdir beneath /tmp",
			setup: func(t *testing.T, work string) {
				if !strings.HasPrefix(work, "/tmp/") {
					t.Skipf("the test's directory %s is not beneath /tmp", work)
				}
			},
			writes:  "echo x > .claude/settings.json; echo x > .mcp.json",
			refused: "both writes to held names",
			check: func(t *testing.T, work string) {
				if b, _ := os.ReadFile(work + "/.claude/settings.json"); string(b) != "{}" {
					t.Errorf(".claude/settings.json = %q, want it untouched", b)
				}
				if _, err := os.Lstat(work + "/.mcp.json"); err == nil {
					t.Errorf(".mcp.json reached the host")
				}
			},
		},
		{
			name: "link",
			setup: func(t *testing.T, work string) {
				if err := os.Remove(work + "/.env"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(work+"/src/dev.env", []byte("APP=1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("src/dev.env", work+"/.env"); err != nil {
					t.Fatal(err)
				}
			},
			writes:  "echo X=1 >> .env; echo X=1 >> src/dev.env",
			refused: "the write through the link and the one to its target",
			check: func(t *testing.T, work string) {
				if b, _ := os.ReadFile(work + "/src/dev.env"); string(b) != "APP=1\n" {
					t.Errorf("src/dev.env = %q, want it untouched", b)
				}
			},
		},
		{
			name:    "nested",
			setup:   func(t *testing.T, work string) { nestedTree(t, work) },
			writes:  "echo x >> sub/.git/config; echo x > src/.claude/settings.json",
			refused: "the writes to a nested repository's config and a subdirectory's settings",
			check: func(t *testing.T, work string) {
				if b, _ := os.ReadFile(work + "/sub/.git/config"); string(b) != "[core]" {
					t.Errorf("sub/.git/config = %q, want it untouched", b)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			tc.setup(t, r.work)
			p := r.policy(WorkspaceWrite)
			p.Private = true
			cmd := exec.Command("/bin/sh", "-c", tc.writes+"; echo y >> src/b.txt")
			cmd.Dir = r.work
			serr, werr, out := stageRun(t, p, cmd, nil)
			if serr != nil {
				t.Fatalf("Started: %v\n%s", serr, out)
			}
			if werr != nil {
				t.Fatalf("the command: %v\n%s", werr, out)
			}
			if n := strings.Count(out, "ead-only file system"); n != 2 {
				t.Errorf("the command said %q, want %s refused (read-only file system)", out, tc.refused)
			}
			tc.check(t, r.work)
			if b, _ := os.ReadFile(r.work + "/src/b.txt"); string(b) != "by\n" {
				t.Errorf("src/b.txt = %q, want the run's line appended", b)
			}
		})
	}
}

// TestStageIPCPrivate: a first stage's run has an IPC namespace of its
// own, so that the System V segment it makes and leaves (ipcmk, where the
// host has it) is never the host's and goes with the run.
func TestStageIPCPrivate(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	host, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		t.Fatal(err)
	}
	script := "readlink /proc/self/ns/ipc"
	if _, err := exec.LookPath("ipcmk"); err == nil {
		script += " && ipcmk -M 1048576 >&2"
	}
	before := hostSegments(t)
	work := t.TempDir()
	serr, werr, out := stageRun(t, Policy{Level: ReadOnly, Workdir: work, Temp: work}, exec.Command("/bin/sh", "-c", script), nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if got, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(got, "ipc:[") || got == host {
		t.Errorf("the run's IPC namespace is %q, the host's %q: want one of its own", got, host)
	}
	for _, s := range hostSegments(t) {
		if !slices.Contains(before, s) {
			t.Errorf("the host has a segment the run made: %s", s)
			if _, id, ok := strings.Cut(s, " "); ok {
				n, _ := strconv.Atoi(id)
				unix.SysvShmCtl(n, unix.IPC_RMID, nil)
			}
		}
	}
}

// hostSegments returns the key and id of each System V shared-memory
// segment of this process's IPC namespace.
func hostSegments(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 2 {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}
