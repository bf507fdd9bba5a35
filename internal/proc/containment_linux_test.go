//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// levels are the containment levels this machine gives, each forced.
func levels(t *testing.T) []Containment {
	t.Helper()
	if lvl, err := Probe(Cgroup, ""); lvl != Cgroup {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("Probe(Cgroup) = %v, %v: CI runs as root, where cgroups must work", lvl, err)
		}
		t.Logf("cgroup level not available here (%v): testing tracking only", err)
		return []Containment{Tracking}
	}
	return []Containment{Cgroup, Tracking}
}

// TestHidingProcesses runs each process that hides from tracking at each
// level, lets the root exit by itself, and checks that Kill leaves none of
// them alive. The tracking level cannot find the ones marked
// trackingMisses (documented on Tracking): for those the test checks only
// the cgroup level, and kills what tracking missed by pid.
func TestHidingProcesses(t *testing.T) {
	noLeaks(t)
	markUsed("perl")
	for _, tt := range []struct {
		script         string
		trackingMisses bool
	}{
		{"envi", true},
		{"fastenvi", true},
		{"retitle", true},
		{"cloneparent", true},
	} {
		for _, level := range levels(t) {
			t.Run(tt.script+"/"+level.String(), func(t *testing.T) {
				if tt.script == "cloneparent" && runtime.GOARCH != "amd64" {
					t.Skip("the script calls clone by its amd64 number")
				}
				r := startRun(t, Attr{Containment: level, Marker: marker(t)}, "perl", tt.script)
				if got := r.tree.Containment(); got != level {
					t.Fatalf("Containment() = %v, want %v", got, level)
				}
				pids := r.awaitPids(2)
				r.exited()
				if tt.script == "retitle" {
					until(t, "the daemon's title overwrote its environment", func() bool {
						b, err := os.ReadFile("/proc/" + strconv.Itoa(pids[1]) + "/environ")
						return err == nil && !strings.Contains(string(b), "PROC_TEST_MARKER")
					})
				}
				rep := r.tree.Kill()
				hidden := r.pids[1]
				if level == Tracking && tt.trackingMisses {
					if alive(hidden) {
						t.Logf("tracking missed %d, as documented; killing it by pid", hidden.pid)
						unix.Kill(int(hidden.pid), unix.SIGKILL)
						until(t, "the hidden process is gone", func() bool { return !alive(hidden) })
					}
				} else if alive(hidden) {
					t.Errorf("%d survived Kill (report %+v)", hidden.pid, rep)
					unix.Kill(int(hidden.pid), unix.SIGKILL)
				}
				if tt.script == "cloneparent" {
					// The sibling is the test process's child, which a
					// tracking-level Kill without Subreaper leaves
					// unreaped: reap it once it has exited.
					until(t, "the sibling has exited", func() bool { return !alive(hidden) })
					var info unix.Siginfo
					unix.Waitid(unix.P_PID, int(hidden.pid), &info, unix.WEXITED|unix.WNOHANG, nil)
				}
				r.wait()
			})
		}
	}
}

// TestHostKilled: a host that starts a tree (a root, a child in its group
// and a daemon in a session of its own with a cleared environment) is
// killed with SIGKILL. At the cgroup level the keeper kills the whole
// tree; at the tracking level the parent-death signal takes down the root
// alone (documented on Tracking).
func TestHostKilled(t *testing.T) {
	markUsed("host", "spawn", "hang")
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			host := helperCmd("host", level.String(), "spawn", "same", "hang", "spawn", "setsid-envi", "hang", "hang")
			host.Stdout = nil
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var tree []procKey
			for len(tree) < 3 && sc.Scan() {
				f := strings.Fields(sc.Text())
				pid, _ := strconv.Atoi(f[1])
				start, _ := strconv.ParseUint(f[2], 10, 64)
				if pid != host.Process.Pid {
					tree = append(tree, procKey{int32(pid), start})
				}
			}
			if len(tree) < 3 {
				host.Process.Kill()
				host.Wait()
				t.Fatalf("host reported %d processes of its tree, want 3", len(tree))
			}
			var root procKey
			for _, p := range tree {
				if st, err := readStat(p.pid); err == nil && st.start == p.start && st.ppid == int32(host.Process.Pid) {
					root = p
				}
			}
			keepers := keepersOf(t, host.Process.Pid)
			if level == Cgroup && len(keepers) == 0 {
				t.Errorf("host %d started no keeper at the cgroup level", host.Process.Pid)
			}
			killed := time.Now()
			host.Process.Kill()
			host.Wait()
			expect := tree
			if level == Tracking {
				// The root is the host's child; the processes print their
				// reports in no set order.
				expect = nil
				for _, p := range tree {
					if p == root {
						expect = append(expect, p)
					}
				}
				if len(expect) != 1 {
					t.Fatalf("no reported process %v is the host's child %v", tree, root)
				}
			}
			for _, p := range expect {
				awaitExit(t, p)
			}
			t.Logf("%d processes gone %v after the host's SIGKILL", len(expect), time.Since(killed))
			for _, p := range tree {
				if alive(p) {
					if level != Tracking {
						t.Errorf("pid %d survived its host's death", p.pid)
					}
					unix.Kill(int(p.pid), unix.SIGKILL)
					awaitExit(t, p)
				}
			}
			// The keeper ends once it has removed the dead host's cgroups,
			// after the tree is gone: wait for it, so that it is not left
			// as an unreaped zombie of a subreaper test process.
			for _, k := range keepers {
				awaitExit(t, k)
			}
			reapOrphansOf(t, host.Process.Pid)
		})
	}
}

// keepersOf returns the cgroup keepers (keeper_linux.go) that host started.
func keepersOf(t *testing.T, host int) []procKey {
	t.Helper()
	sn, err := theScanner().scan(math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	var ks []procKey
	for _, p := range sn.procs {
		if p.ppid != int32(host) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		if err == nil && strings.HasPrefix(string(b), "clinvoke-keeper\x00") {
			ks = append(ks, procKey{p.pid, p.start})
		}
	}
	return ks
}

// awaitExit waits until p has exited (a zombie counts), through a pidfd.
func awaitExit(t *testing.T, p procKey) {
	t.Helper()
	fd, err := unix.PidfdOpen(int(p.pid), 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if !alive(p) {
		return
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(stuck/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if n == 0 {
			t.Fatalf("pid %d still alive after %v", p.pid, stuck)
		}
		return
	}
}

// reapOrphansOf reaps the test process's zombie children that a dead
// helper host left behind: when the test process is a subreaper (an
// earlier test made it one), the host's tree and keeper re-parent to it.
func reapOrphansOf(t *testing.T, host int) {
	t.Helper()
	hostStat, _ := readStat(int32(os.Getpid()))
	_ = hostStat
	for _, pid := range zombieChildren() {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, int(pid), &info, unix.WEXITED|unix.WNOHANG, nil); err != nil && !errors.Is(err, unix.ECHILD) {
			t.Logf("reaping %d: %v", pid, err)
		}
	}
}

// TestUnprivilegedFallsBack runs Probe and a tree as an unprivileged user
// (nobody), as most users run: with no cgroup it may write, the level is
// tracking, Probe says why, and the tree works.
func TestUnprivilegedFallsBack(t *testing.T) {
	markUsed("probe", "hang")
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user; as that user, the other tests cover this level")
	}
	got := runAsNobody(t, -1, "probe")
	for _, want := range []string{
		"level auto tracking err proc: the cgroup level is unavailable: ",
		"tree auto tracking",
		"start cgroup proc: the cgroup level is unavailable: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("probe as nobody: output lacks %q", want)
		}
	}
}

// TestCgroupParentNotEntered: a user given a cgroup (Attr.CgroupParent
// made and chowned to it, as cgroup v2 delegation does) may make cgroups
// there, but the kernel starts processes in them only for a host that
// runs inside the parent (it must be able to write cgroup.procs of the
// cgroup holding both). Outside it, Probe and Start agree on the tracking
// level and say why, naming the cgroup and ErrRefused, and a forced Cgroup
// fails with that reason, not with an exec error; inside it, both give the
// cgroup level. Run as nobody.
func TestCgroupParentNotEntered(t *testing.T) {
	markUsed("probe", "hang")
	if os.Geteuid() != 0 {
		t.Skip("needs root to delegate a cgroup to an unprivileged user")
	}
	parent, inside := delegatedCgroup(t)
	t.Run("outside", func(t *testing.T) {
		got := runAsNobody(t, -1, "probe", parent)
		refused := "the kernel refuses to start processes in the cgroup " + parent + "/clinvoke-"
		for _, want := range []string{
			"level auto tracking err proc: the cgroup level is unavailable: " + refused,
			"outside the cgroup parent " + parent + " [unavailable refused permission]",
			"level cgroup tracking err proc: the cgroup level is unavailable: " + refused,
			"tree auto tracking",
			"start cgroup proc: the cgroup level is unavailable: " + refused,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("probe as nobody outside %s: output lacks %q", parent, want)
			}
		}
	})
	t.Run("inside", func(t *testing.T) {
		fd, err := unix.Open(inside, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		got := runAsNobody(t, fd, "probe", parent)
		for _, want := range []string{"level auto cgroup err <nil>", "level cgroup cgroup err <nil>", "tree auto cgroup", "tree cgroup cgroup"} {
			if !strings.Contains(got, want) {
				t.Errorf("probe as nobody inside %s: output lacks %q", inside, want)
			}
		}
	})
}

// TestCgroupParentLeft: a host that probed from inside its cgroup parent
// and then left it (moved out by root) is refused by the kernel at its
// next start; Start asks the kernel again, tells the refusal from a
// program that cannot run, and falls back (Auto) or says why (Cgroup).
func TestCgroupParentLeft(t *testing.T) {
	markUsed("probe", "hang")
	if os.Geteuid() != 0 {
		t.Skip("needs root to delegate a cgroup to an unprivileged user and move its process")
	}
	parent, inside := delegatedCgroup(t)
	fd, err := unix.Open(inside, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := nobodyCmd(t, fd, "probe", parent, "wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "probed" {
		got.WriteString(sc.Text() + "\n")
	}
	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatalf("moving the host out of %s: %v", parent, err)
	}
	stdin.Close()
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe as nobody: %v", err)
	}
	t.Logf("probe as nobody printed:\n%s", got.String())
	for _, want := range []string{
		"level auto cgroup err <nil>",
		"tree auto tracking",
		"start cgroup proc: the cgroup level is unavailable: the kernel refuses to start processes in the cgroup " + parent + "/clinvoke-",
		"outside the cgroup parent " + parent + " [unavailable refused permission]",
	} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("probe as nobody, moved out of %s after the probe: output lacks %q", parent, want)
		}
	}
}

// TestStartNotExecutable: at every level, a program that cannot be
// executed fails Start with the exec's error, not ErrUnavailable: at the
// cgroup level, the kernel's refusal of the cgroup reads the same
// (EACCES), and must not be taken for it, nor it for the refusal.
func TestStartNotExecutable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			tree, err := Start(&Attr{Path: path, Args: []string{path}, Containment: level})
			if err == nil {
				tree.Kill()
				tree.Wait()
				t.Fatalf("Start(%s) started a tree", path)
			}
			if !errors.Is(err, os.ErrPermission) || errors.Is(err, ErrUnavailable) {
				t.Errorf("Start(not executable) error = %v, want the exec's permission error and not ErrUnavailable", err)
			}
		})
	}
}

// delegatedCgroup makes a cgroup below the test's own and hands it to
// nobody as cgroup v2 delegation does (the directory, cgroup.procs,
// cgroup.threads and cgroup.subtree_control), with a cgroup below it for
// a host to run inside; both are removed when the test ends.
func delegatedCgroup(t *testing.T) (parent, inside string) {
	t.Helper()
	if lvl, err := Probe(Cgroup, ""); lvl != Cgroup {
		// Root without a writable cgroup v2: a container, say.
		if os.Getenv("CI") == "true" {
			t.Fatalf("Probe(Cgroup) = %v, %v: CI runs as root, where cgroups must work", lvl, err)
		}
		t.Skipf("no cgroup level here, even as root: %v", err)
	}
	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	parent = filepath.Join(own, fmt.Sprintf("proc-test-delegated-%d-%s", os.Getpid(), t.Name()))
	inside = filepath.Join(parent, "host")
	for _, dir := range []string{parent, inside} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// The helpers' keepers remove their homes once the helpers are
		// gone.
		until(t, "the delegated cgroup is removed", func() bool {
			unix.Rmdir(inside)
			return unix.Rmdir(parent) == nil
		})
	})
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(parent, f), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return parent, inside
}

// runAsNobody runs the helper name with args as the user nobody, started
// in the cgroup of cgroupFD (a directory descriptor; -1 for the test's
// own), and returns its output.
func runAsNobody(t *testing.T, cgroupFD int, name string, args ...string) string {
	t.Helper()
	cmd := nobodyCmd(t, cgroupFD, name, args...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
	t.Logf("%s as nobody printed:\n%s", name, out)
	return string(out)
}

// nobodyCmd returns the command that runs the helper name with args as
// the user nobody, from a copy of the test binary nobody may run (removed
// when the test ends), started in the cgroup of cgroupFD (a directory
// descriptor; -1 for the test's own).
func nobodyCmd(t *testing.T, cgroupFD int, name string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "proc-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "proc.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd(name, args...)
	cmd.Path, cmd.Args[0], cmd.Dir = bin, bin, dir
	cmd.Stdout = nil
	cmd.SysProcAttr = &unix.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgroupFD
	}
	return cmd
}

// matches lists the errors of this package and of fs err matches, for a
// helper's report: "[unavailable refused permission]".
func matches(err error) []string {
	var m []string
	for _, e := range []struct {
		name string
		err  error
	}{{"unavailable", ErrUnavailable}, {"refused", ErrRefused}, {"permission", os.ErrPermission}, {"notexist", os.ErrNotExist}} {
		if errors.Is(err, e.err) {
			m = append(m, e.name)
		}
	}
	return m
}

// TestCgroupsRemoved: an exited tree's empty cgroup is reused by the next
// tree, a killed tree's never is (the kernel would kill whatever starts in
// it), and all are removed once no tree has started or ended for a while.
func TestCgroupsRemoved(t *testing.T) {
	if lvl, _ := Probe(Cgroup, ""); lvl != Cgroup {
		t.Skip("no cgroup level here: nothing to remove")
	}
	markUsed("exit", "hang")
	home, err := homeFor("")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r := startRun(t, Attr{Containment: Cgroup}, "exit", "0")
		r.exited()
		r.tree.Kill()
		r.wait()
	}
	killed := startRun(t, Attr{Containment: Cgroup}, "hang")
	killed.awaitPids(1)
	killed.tree.Kill()
	killed.wait()
	// The next tree must not start in the killed tree's cgroup.
	r := startRun(t, Attr{Containment: Cgroup}, "exit", "3")
	r.exited()
	if st := r.wait(); st.Code != 3 {
		t.Fatalf("a tree after a killed one ended %+v, want exit 3", st)
	}
	until(t, "every run cgroup is removed", func() bool {
		left, _ := filepath.Glob(filepath.Join(home.dir, "r*"))
		return len(left) == 0
	})
}

// TestDeadHomesOfThisNamespaceOnly: a host removes the cgroups of dead
// hosts, but judges only hosts of its own PID namespace: a pid from another
// namespace means nothing here (a host running as PID 1 of a container
// removed the live homes of the hosts outside it).
func TestDeadHomesOfThisNamespaceOnly(t *testing.T) {
	home, err := homeFor("")
	if err != nil {
		t.Skip("no cgroup level here")
	}
	parent := filepath.Join(home.dir, "dead-homes-test") // a cgroup no tree uses
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(parent)
	dead := int32(1 << 22) // above pid_max's default: no such process
	other := filepath.Join(parent, fmt.Sprintf("clinvoke-%d-%d-1", pidNamespace()+1, dead))
	mine := filepath.Join(parent, fmt.Sprintf("clinvoke-%d-%d-1", pidNamespace(), dead))
	for _, d := range []string{other, mine} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(other)
	removeDeadHomes(parent, "")
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead home of this namespace is still there (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the home of another namespace's host was removed: %v", err)
	}
}
