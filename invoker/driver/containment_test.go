//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clinvoke/clinvoke/internal/procstat"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// perlCLI is the start of every hostile fake CLI below: a Perl program
// (Perl forks without a runtime's threads, so each trick is done as a C
// daemon does it) that records each process it makes in $PIDFILE and
// speaks the test backend's (Codex's) events.
const perlCLI = `#!/usr/bin/perl
use POSIX (); $| = 1;
sub record { my $p = shift; open(my $s, "<", "/proc/$p/stat") or die "$!"; my $l = <$s>; $l =~ s/^.*\) //; my @f = split / /, $l;
  open(my $o, ">>", $ENV{PIDFILE}) or die "$!"; print $o "$p $f[19]\n"; close($o); }
sub answer { print qq({"type":"thread.started","thread_id":"hostile-1"}\n{"type":"item.completed","item":{"type":"agent_message","text":"done"}}\n{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n); }
record($$);
# recorded(): in a child, after record: tells the root; await(): in the
# root, waits until the child has recorded itself.
pipe(my $rd, my $wr) or die "$!";
sub recorded { syswrite($wr, "x"); close($wr); close($rd); }
sub await { close($wr); sysread($rd, my $b, 1); close($rd); }
`

// hostile lists fake CLIs that hide processes from tracking. Each leaves
// something running after it exits. trackingMisses marks the ones the
// tracking level cannot find (documented in the package doc, # Containment).
var hostile = []struct {
	name           string
	script         string
	trackingMisses bool
	opts           []invoker.Options
}{
	// A tool that daemonizes with a cleared environment, as
	// "setsid -f env -i sleep 7777" does (and as every daemonizing tool
	// does under Codex's shell_environment_policy inherit = "none").
	{name: "setsid env -i", trackingMisses: true, script: `
if (fork() == 0) { POSIX::setsid(); if (fork() == 0) { record($$); recorded(); %ENV = (); exec("sleep", "7777"); } POSIX::_exit(0); }
await(); answer(); exit 0;`},
	// A daemon that keeps its environment but sets a long process title,
	// which overwrites /proc/PID/environ (nginx, redis, gunicorn).
	{name: "setproctitle", trackingMisses: true, script: `
if (fork() == 0) { POSIX::setsid(); if (fork() == 0) { record($$); recorded(); $0 = "x" x 16384; sleep(7777); exit 0; } POSIX::_exit(0); }
await(); answer(); exit 0;`},
	// A sibling made with clone(CLONE_PARENT): its parent is the host.
	{name: "clone parent", trackingMisses: true, script: `
my $c = syscall(56, 0x8000 | 17, 0, 0, 0, 0); if ($c == 0) { record($$); recorded(); exec("sleep", "7777"); }
await(); answer(); exit 0;`},
	// The same daemon with the host a child subreaper: it is adopted by
	// the host, and must be killed and reaped, not left running.
	{name: "subreaper adopts", trackingMisses: true, opts: []invoker.Options{invoker.Options{Subreaper: true}}, script: `
if (fork() == 0) { POSIX::setsid(); if (fork() == 0) { record($$); recorded(); %ENV = (); exec("sleep", "7777"); } POSIX::_exit(0); }
await(); answer(); exit 0;`},
	// An escapee that writes a line to the inherited stdout every 100 ms:
	// Invoke must still return, within the wait delay of the sweep.
	{name: "escapee writes stdout", trackingMisses: true, script: `
if (fork() == 0) { POSIX::setsid(); if (fork() == 0) { record($$); recorded(); %ENV = (); while (1) { print "{}\n"; select(undef, undef, undef, 0.1); } } POSIX::_exit(0); }
await(); answer(); exit 0;`},
}

// levelsHere returns the containment levels this machine gives, each
// forced by invoker.Options.Containment. Under CI, which runs as root, the cgroup
// level must be among them.
func levelsHere(t *testing.T) []string {
	t.Helper()
	lvl, err := probe("cgroup")
	if lvl == "cgroup" {
		return []string{"cgroup", "tracking"}
	}
	if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
		t.Fatalf("probe(cgroup) = %q, %q: CI runs as root, where cgroups must work", lvl, err)
	}
	t.Logf("no cgroup containment here (%v): testing the tracking level only", err)
	return []string{"tracking"}
}

// TestHostileCLIs runs each hostile CLI at each containment level and
// checks, by the pids the CLI recorded, that Invoke left nothing running
// where the level promises it, and that Invoke returned at all.
func TestHostileCLIs(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatalf("perl is needed for the hostile fake CLIs: %v", err)
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the scripts call clone by its amd64 number")
	}
	for _, tt := range hostile {
		for _, level := range levelsHere(t) {
			t.Run(tt.name+"/"+level, func(t *testing.T) {
				dir := t.TempDir()
				cli := filepath.Join(dir, "cli")
				require.NoError(t, os.WriteFile(cli, []byte(perlCLI+tt.script), 0o755))
				pidfile := filepath.Join(dir, "pids")
				opts := append([]invoker.Options{
					invoker.Options{Binary: cli, Logger: testLogger(t), Containment: level, WaitDelay: 100 * time.Millisecond},
				}, tt.opts...)
				inv := driver.New(testBackend{}, opts...)
				// A guard against a hang only: Invoke must return, whatever
				// the escapee does.
				ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
				defer cancel()
				res, err := inv.Invoke(ctx, invoker.Request{Prompt: "go", Workdir: dir, Env: []string{"PIDFILE=" + pidfile}})
				require.NotErrorIs(t, err, context.DeadlineExceeded, "Invoke did not return")
				assert.NoError(t, err)
				assert.Equal(t, "done", res.Text)
				assert.Equal(t, level, res.Containment, "Result.Containment")
				procs := readPidfile(t, pidfile)
				require.GreaterOrEqual(t, len(procs), 2, "processes the CLI recorded")
				for _, p := range procs[1:] {
					if !p.alive() {
						continue
					}
					if level == "tracking" && tt.trackingMisses {
						t.Logf("tracking missed %d, as documented; killing it by pid", p.pid)
					} else {
						t.Errorf("pid %d survived Invoke", p.pid)
					}
					p.kill(t)
				}
			})
		}
	}
}

// TestIdleTimeoutAfterStdoutClosed: a CLI that closes its stdout and runs
// on is idle; the idle timeout fires.
func TestIdleTimeoutAfterStdoutClosed(t *testing.T) {
	dir := t.TempDir()
	cli := filepath.Join(dir, "cli")
	script := `print qq({"type":"thread.started","thread_id":"quiet-1"}\n); close(STDOUT); sleep(600);`
	require.NoError(t, os.WriteFile(cli, []byte(perlCLI+script), 0o755))
	// 3 s: room for perl to start and print on a busy machine.
	inv := driver.New(testBackend{}, invoker.Options{Binary: cli, Logger: testLogger(t), IdleTimeout: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	res, err := inv.Invoke(ctx, invoker.Request{Prompt: "go", Workdir: dir, Env: []string{"PIDFILE=" + filepath.Join(dir, "pids")}})
	require.ErrorIs(t, err, invoker.ErrIdleTimeout)
	assert.Equal(t, "quiet-1", res.SessionID)
	for _, p := range readPidfile(t, filepath.Join(dir, "pids")) {
		if p.alive() {
			t.Errorf("pid %d survived", p.pid)
			p.kill(t)
		}
	}
}

// TestContainmentUnavailable: asking for the cgroup level where it cannot
// be had fails before anything starts, with a typed error that says how to
// get it.
func TestContainmentUnavailable(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "not-a-cgroup")
	f := newFixture(t, fakeagent.Script{}, invoker.Options{Containment: "cgroup", CgroupParent: parent})
	res, err := f.inv.Invoke(context.Background(), f.req)
	require.ErrorIs(t, err, invoker.ErrContainment)
	assert.Contains(t, err.Error(), "Delegate=yes", "the error says how to get a cgroup")
	assert.Contains(t, err.Error(), "containment unavailable: cgroup: cgroup parent "+parent, "the error names the level and the cgroup")
	assert.Equal(t, 1, strings.Count(err.Error(), "unavailable"), "the error says once that the level is unavailable")
	assert.NotContains(t, err.Error(), "proc:", "the error shows no internal package")
	assert.Equal(t, -1, res.ExitCode)
	assert.Equal(t, "", res.Containment, "nothing started")
	assert.NoFileExists(t, filepath.Join(f.script.RecordDir, "run.json"), "the fake agent ran")
}

type pidRecord struct {
	pid   int
	start string
}

func readPidfile(t *testing.T, path string) []pidRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the recorded pids: %v", err)
	}
	var out []pidRecord
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p pidRecord
		if _, err := fmt.Sscan(line, &p.pid, &p.start); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether the recorded process still runs (same start time,
// not a zombie).
func (p pidRecord) alive() bool {
	st, err := procstat.Read(p.pid)
	return err == nil && strconv.FormatUint(st.Start, 10) == p.start && st.State != 'Z'
}

func (p pidRecord) kill(t *testing.T) {
	syscall.Kill(p.pid, syscall.SIGKILL)
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	for p.alive() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// probe reports the level an Invoker forced to lvl gets here, and why not
// the best one (Capabilities.Containment and ContainmentNote).
func probe(lvl string) (string, string) {
	c := driver.New(testBackend{}, invoker.Options{Containment: lvl}).Capabilities()
	return c.Containment, c.ContainmentNote
}

// TestCgroupParentNotEntered: Options.CgroupParent names a cgroup handed
// to the host's user (made by root and chowned to it, as cgroup v2
// delegation does). The user may make cgroups there, but the kernel starts
// processes in them only for a host that runs inside it, and Capabilities
// must say what the runs will get: from outside, with the level left to
// the engine, both say "tracking", and the note names the cgroup and the
// fix; forced to "cgroup", Capabilities gives no level and Invoke fails
// with ErrContainment naming the cgroup, never ErrNotInstalled. From
// inside, both say "cgroup".
//
// As root, the test makes such a cgroup and runs itself as nobody, from
// outside the cgroup and from inside it. As another user, it checks the
// cgroup named by testenv.CgroupParentEnv (CI hands one to its
// unprivileged user) from where it runs.
func TestCgroupParentNotEntered(t *testing.T) {
	parent := os.Getenv(testenv.CgroupParentEnv)
	switch {
	case parent != "":
		checkCgroupParent(t, filepath.Clean(parent))
	case os.Geteuid() == 0:
		delegateAndRerun(t)
	case os.Getenv("CI") == "true":
		t.Fatalf("%s is unset: CI runs the unprivileged tests with it naming a cgroup handed to their user", testenv.CgroupParentEnv)
	default:
		t.Skipf("needs root, or %s naming a cgroup v2 directory handed to this user", testenv.CgroupParentEnv)
	}
}

// checkCgroupParent checks runs with Options.CgroupParent parent from
// where the test runs, inside parent or not.
func checkCgroupParent(t *testing.T, parent string) {
	inside := runsInside(t, parent)
	t.Logf("the test process runs inside %s: %v", parent, inside)
	for _, forced := range []string{"", "cgroup"} {
		t.Run("Containment="+forced, func(t *testing.T) {
			f := newFixture(t, fakeagent.Script{}, invoker.Options{CgroupParent: parent, Containment: forced})
			caps := f.inv.Capabilities()
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
			defer cancel()
			res, err := f.inv.Invoke(ctx, f.req)
			want := "cgroup"
			switch {
			case !inside && forced == "":
				want = "tracking"
			case !inside:
				want = ""
			}
			assert.Equal(t, want, caps.Containment, "Capabilities.Containment")
			if inside {
				assert.Empty(t, caps.ContainmentNote, "Capabilities.ContainmentNote")
			} else {
				assert.Contains(t, caps.ContainmentNote, "outside the cgroup parent "+parent, "Capabilities.ContainmentNote says why")
				assert.Contains(t, caps.ContainmentNote, "run the host process inside "+parent, "Capabilities.ContainmentNote says how to get the cgroup level")
			}
			if want == "" {
				require.ErrorIs(t, err, invoker.ErrContainment)
				assert.NotErrorIs(t, err, invoker.ErrNotInstalled)
				assert.Contains(t, err.Error(), "outside the cgroup parent "+parent)
				assert.Contains(t, err.Error(), caps.ContainmentNote, "the run's error says what Capabilities' note says")
				assert.NoFileExists(t, filepath.Join(f.script.RecordDir, "run.json"), "the fake agent ran")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want, res.Containment, "Result.Containment agrees with Capabilities.Containment")
			f.assertReaped(1)
		})
	}
}

// runsInside reports whether the test process is in parent or in a
// cgroup below it.
func runsInside(t *testing.T, parent string) bool {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	found := false
	err := filepath.WalkDir(parent, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || slices.Contains(strings.Fields(string(b)), self)
		return nil
	})
	if err != nil {
		t.Fatalf("reading the cgroups of %s: %v", parent, err)
	}
	return found
}

// delegateAndRerun makes a cgroup, hands it to nobody as cgroup v2
// delegation does, and runs this test as nobody with it, once from
// outside the cgroup and once from inside it.
func delegateAndRerun(t *testing.T) {
	if lvl, note := probe("cgroup"); lvl != "cgroup" {
		// Root without a writable cgroup v2: a container, say.
		if os.Getenv("CI") == "true" {
			t.Fatalf("probe(cgroup) = %q, %q: CI runs as root, where cgroups must work", lvl, note)
		}
		t.Skipf("no cgroup level here, even as root: %s", note)
	}
	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(own, fmt.Sprintf("driver-test-delegated-%d", os.Getpid()))
	inside := filepath.Join(parent, "host")
	for _, dir := range []string{parent, inside} {
		require.NoError(t, os.Mkdir(dir, 0o755))
	}
	t.Cleanup(func() {
		// The keeper of the runs' cgroups removes them once its host
		// (the test as nobody) has exited.
		deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
		for syscall.Rmdir(inside); syscall.Rmdir(parent) != nil; syscall.Rmdir(inside) {
			if time.Now().After(deadline) {
				t.Errorf("%s is still there: %v", parent, syscall.Rmdir(parent))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		require.NoError(t, os.Chown(filepath.Join(parent, f), 65534, 65534))
	}
	// A copy of the test binary nobody may run.
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "driver-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	bin := filepath.Join(dir, "driver.test")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	tmp := filepath.Join(dir, "tmp") // nobody's TMPDIR
	require.NoError(t, os.Mkdir(tmp, 0o700))
	require.NoError(t, os.Chown(tmp, 65534, 65534))

	for _, where := range []string{"outside", "inside"} {
		t.Run(where, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^"+t.Name()[:strings.IndexByte(t.Name(), '/')]+"$", "-test.v", "-test.count=1")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), testenv.CgroupParentEnv+"="+parent, "TMPDIR="+tmp)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if where == "inside" {
				fd, err := syscall.Open(inside, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
				require.NoError(t, err)
				defer syscall.Close(fd)
				cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
			}
			out, err := cmd.CombinedOutput()
			t.Logf("as nobody, %s %s:\n%s", where, parent, out)
			if err != nil {
				t.Errorf("the test as nobody, %s %s: %v", where, parent, err)
			}
		})
	}
}

// ownCgroup returns the directory of the test process's cgroup v2.
func ownCgroup() (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var mount, root string
	for line := range strings.SplitSeq(string(mi), "\n") {
		// 36 35 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 {
			root, mount = f[3], f[4]
			break
		}
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(cg), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok && mount != "" {
			if rel, ok := strings.CutPrefix(path, root); ok {
				return filepath.Join(mount, rel), nil
			}
		}
	}
	return "", fmt.Errorf("no cgroup v2 mount holds the test process (/proc/self/cgroup: %q)", cg)
}
