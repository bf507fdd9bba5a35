//go:build linux

package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"golang.org/x/sys/unix"
)

func init() {
	// escapeeach: try every way out of the caller's cgroups, each on its
	// own (moving to the host's cgroup and to the root cgroup of v2 and
	// of each v1 hierarchy, by cgroup.procs and by v1's tasks, writing -1
	// or "max" to its own limits), print "WAY ERR" for each, then "done",
	// and run until killed.
	helpers["escapeeach"] = func(args []string) int {
		host := os.Getenv("PROC_TEST_HOST_PID")
		cg, err1 := os.ReadFile("/proc/" + host + "/cgroup")
		own, err2 := os.ReadFile("/proc/self/cgroup")
		mi, err3 := os.ReadFile("/proc/self/mountinfo")
		mount, root, err4 := cgroup2Mount()
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		pid := strconv.Itoa(os.Getpid())
		for line := range strings.SplitSeq(string(cg), "\n") {
			if path, ok := strings.CutPrefix(line, "0::"); ok {
				rel, _ := strings.CutPrefix(path, root)
				fmt.Println("v2", writeFile(filepath.Join(mount, rel, "cgroup.procs"), pid))
			}
		}
		fmt.Println("v2-root", writeFile(filepath.Join(mount, "cgroup.procs"), pid))
		for line := range strings.SplitSeq(string(own), "\n") {
			if path, ok := strings.CutPrefix(line, "0::"); ok {
				rel, _ := strings.CutPrefix(path, root)
				for _, f := range []string{"memory.max", "memory.swap.max", "pids.max"} {
					if err := writeFile(filepath.Join(mount, rel, f), "max"); !errors.Is(err, fs.ErrNotExist) {
						fmt.Println("v2-"+f, err)
					}
				}
			}
		}
		seen := map[*v1Hier]bool{}
		for i, h := range v1Hierarchies(mi, cg, "") {
			if h == nil || seen[h] || h.err != nil {
				continue
			}
			seen[h] = true
			way := "v1-" + strconv.Itoa(i)
			fmt.Println(way, writeFile(filepath.Join(h.own, "cgroup.procs"), pid))
			for _, f := range []string{"cgroup.procs", "tasks"} {
				fmt.Println(way+"-root-"+f, writeFile(filepath.Join(h.mount, f), pid))
			}
		}
		if h := v1Hierarchies(mi, own, "")[v1Memory]; h != nil && h.own != "" {
			for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
				if err := writeFile(filepath.Join(h.own, f), "-1"); !errors.Is(err, fs.ErrNotExist) {
					fmt.Println(f, err)
				}
			}
		}
		if h := v1Hierarchies(mi, own, "")[v1Pids]; h != nil && h.own != "" {
			if err := writeFile(filepath.Join(h.own, "pids.max"), "max"); !errors.Is(err, fs.ErrNotExist) {
				fmt.Println("v1-pids.max", err)
			}
		}
		fmt.Println("done")
		hang()
		return 0
	}
}

func init() {
	// sysvshm KEY MIB: make a System V shared-memory segment of MIB MiB
	// (1 MiB left unwritten for 0) under KEY, write every page of it, and
	// exit leaving it (no IPC_RMID), as a tool that dies mid-work would.
	helpers["sysvshm"] = func(args []string) int {
		key, _ := strconv.Atoi(args[0])
		n, _ := strconv.Atoi(args[1])
		id, err := unix.SysvShmGet(key, max(n, 1)<<20, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shmget:", err)
			return 1
		}
		mem, err := unix.SysvShmAttach(id, 0, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shmat:", err)
			return 1
		}
		for i := range mem[:n<<20] {
			mem[i] = 1
		}
		unix.SysvShmDetach(mem)
		return 0
	}
}

// sandboxed returns Attr.Restrict for a ReadOnly ceiling over a working
// directory and a temporary directory of the test's.
func sandboxed(t *testing.T) func() error {
	t.Helper()
	return sandboxedWith(t, sandbox.Policy{Level: sandbox.ReadOnly})
}

// TestSandboxRootCannotLeaveCgroups: the hostile root of
// TestLimitsRootLeavesCgroups, started under the filesystem ceiling at
// each level (Unlimited with hidden paths, without, and with private
// roots), finds every way out of its cgroups shut (the cgroup file
// systems are read-only from inside at every level, root or not), stays
// in the tree's cgroups under its limits, and is killed with the tree.
// Where v1 hierarchies are mounted, their ways must have been tried.
func TestSandboxRootCannotLeaveCgroups(t *testing.T) {
	noLeaks(t)
	markUsed("escapeeach")
	requireLimits(t, Memory, Tasks)
	t.Setenv("PROC_TEST_HOST_PID", strconv.Itoa(os.Getpid()))
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Contains(string(mi), " - cgroup cgroup ")
	hidden := t.TempDir()
	policies := []struct {
		name string
		p    sandbox.Policy
	}{
		{"read-only", sandbox.Policy{Level: sandbox.ReadOnly}},
		{"workspace-write", sandbox.Policy{Level: sandbox.WorkspaceWrite}},
		{"unlimited", sandbox.Policy{Level: sandbox.Unlimited, Hidden: []string{hidden}}},
		{"unlimited-nothing-hidden", sandbox.Policy{Level: sandbox.Unlimited}},
		{"unlimited-private", sandbox.Policy{Level: sandbox.Unlimited, Hidden: []string{hidden}, Private: true, Visible: []string{filepath.Dir(os.Args[0])}}},
	}
	for _, level := range []Containment{Cgroup, Tracking} {
		for _, pc := range policies {
			t.Run(level.String()+"/"+pc.name, func(t *testing.T) {
				if level == Cgroup && testContainment == Tracking {
					t.Skip("no cgroup level here")
				}
				a := Attr{Containment: level, Limits: Limits{MemoryMax: 64 * mib, Tasks: 32}, Account: true, Restrict: sandboxedWith(t, pc.p)}
				r := startRun(t, a, "escapeeach")
				ways, v1ways := 0, 0
				for {
					line := r.next()
					if line == "done" {
						break
					}
					ways++
					way, res, _ := strings.Cut(line, " ")
					if strings.HasPrefix(way, "v1-") || strings.HasPrefix(way, "memory.") {
						v1ways++
					}
					if !strings.Contains(res, "permission denied") {
						t.Errorf("%s: %s, want permission denied", way, res)
					}
				}
				if ways == 0 {
					t.Fatal("the helper tried no way out")
				}
				if v1 && v1ways == 0 {
					t.Error("v1 hierarchies are mounted, but the helper tried none of their ways out")
				}
				pid := r.tree.Pid()
				if cg := cgroupsOf(t, pid); !strings.Contains(cg, "/clinvoke-") {
					t.Errorf("the root left the tree's cgroups:\n%s", cg)
					// Out of the tree's reach: killed here, so that the
					// failure leaves nothing behind.
					unix.Kill(pid, unix.SIGKILL)
				}
				rep := r.tree.Kill()
				r.wait()
				assertGone(t, r.pids)
				if len(rep.Survivors) != 0 {
					t.Errorf("Kill() left %v", rep.Survivors)
				}
				t.Logf("%d ways out tried (%d of v1)", ways, v1ways)
			})
		}
	}
}

// TestSandboxNoSharedMemoryFile: a sandboxed tool cannot leave a file in
// /dev/shm, where it would outlive the run charged to the host's cgroup.
func TestSandboxNoSharedMemoryFile(t *testing.T) {
	noLeaks(t)
	path := filepath.Join("/dev/shm", fmt.Sprintf("clinvoke-sandbox-test-%d", os.Getpid()))
	t.Cleanup(func() { os.Remove(path) })
	r := startRun(t, Attr{Restrict: sandboxed(t)}, "shmwrite", "1", path)
	if st := r.wait(); st.Code != 1 {
		t.Errorf("shmwrite ended %+v, want exit 1 (its create refused)", st)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want it never made", path, err)
	}
}

// TestSandboxLimitsHold: the fork bomb of TestLimitsForkBomb, under the
// filesystem ceiling, is held to its task limit (on a v1 host, lowered
// by Start, which the restricted forking thread cannot do), its refused
// forks are counted, and Kill leaves nothing of it.
func TestSandboxLimitsHold(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Tasks)
	forkBomb(t, sandboxed(t))
}

// TestSandboxPrivateShmUncharged: a root tool under a memory limit and the
// ceiling with private roots writes 20 MiB to /dev/shm and exits. The file
// was never the host's, and once the run's last process and its retired
// forking thread are gone, so is its charge: the host's home holds no
// more than before (TestLimitsTmpfsOutlivesRun measures the 20 MiB that
// outlive a run without them).
func TestSandboxPrivateShmUncharged(t *testing.T) {
	noLeaks(t)
	markUsed("shmwrite")
	requireLimits(t, Memory)
	if err := sandbox.ProbePrivate(); err != nil {
		t.Skipf("no mount namespace for this process: %v", err)
	}
	rs := buildRuleset(t, sandbox.Policy{Private: true, Visible: []string{filepath.Dir(os.Args[0])}})
	// The forking thread holds the namespace until it exits: wait for it
	// by a pidfd of the thread.
	thread := -1
	t.Cleanup(func() {
		if thread >= 0 {
			unix.Close(thread)
		}
	})
	path := fmt.Sprintf("/dev/shm/clinvoke-private-test-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(path) })
	// The home's charge before: after a run that writes nothing.
	r0 := startRun(t, Attr{Limits: Limits{MemoryMax: 64 * mib}, Account: true, Restrict: sandboxedWith(t, sandbox.Policy{Private: true, Visible: []string{filepath.Dir(os.Args[0])}})}, "shmwrite", "0", path)
	if st := r0.wait(); st.Code != 0 {
		t.Fatalf("the empty write ended %+v", st)
	}
	before := homeMemory(t, r0)
	r := startRun(t, Attr{Limits: Limits{MemoryMax: 64 * mib}, Account: true, Restrict: func() error {
		fd, err := unix.PidfdOpen(unix.Gettid(), unix.PIDFD_THREAD)
		if err != nil {
			return fmt.Errorf("pidfd of the forking thread: %w", err)
		}
		thread = fd
		return rs.Restrict()
	}}, "shmwrite", "20", path)
	if st := r.wait(); st.Code != 0 {
		t.Fatalf("the tool ended %+v", st)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want it never the host's", path, err)
	}
	fds := []unix.PollFd{{Fd: int32(thread), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			break
		}
	}
	// The caller's hold on the namespace (Ruleset.Namespace), released as
	// the library releases it once the tree is reaped.
	if ns := rs.Namespace(); ns == nil {
		t.Error("Namespace() = nil, want the run's mount namespace held")
	} else {
		ns.Close()
	}
	after := homeMemory(t, r)
	t.Logf("the host's home: %.1f MiB before the run wrote 20 MiB to its /dev/shm, %.1f MiB after", float64(before)/mib, float64(after)/mib)
	if after-before > 10*mib {
		t.Errorf("the host's home grew by %d bytes across the run, want the 20 MiB in the run's /dev/shm freed with it", after-before)
	}
}

// sandboxedWith returns Attr.Restrict for p, its working and temporary
// directories the test's when unset.
func sandboxedWith(t *testing.T, p sandbox.Policy) func() error {
	t.Helper()
	return buildRuleset(t, p).Restrict
}

// buildRuleset builds the ruleset of p, its working and temporary
// directories the test's when unset, closed after the test.
func buildRuleset(t *testing.T, p sandbox.Policy) *sandbox.Ruleset {
	t.Helper()
	if _, err := sandbox.Probe(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs on a kernel with Landlock: %v", err)
		}
		t.Skipf("no Landlock here: %v", err)
	}
	if p.Workdir == "" {
		p.Workdir = t.TempDir()
	}
	if p.Temp == "" {
		p.Temp = t.TempDir()
	}
	rs, err := sandbox.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// TestSandboxSysVShmGone: a root tool under a memory limit and the
// ceiling makes a 20 MiB System V shared-memory segment, writes it and
// exits without removing it. The segment was in the run's own IPC
// namespace, never the host's, and once the run's last process and its
// retired forking thread are gone, so is its charge: the host's home
// holds no more than before. Without the namespace the segment outlives
// the run, charged to the host.
func TestSandboxSysVShmGone(t *testing.T) {
	noLeaks(t)
	markUsed("sysvshm")
	requireLimits(t, Memory)
	key := 0x6c690000 | os.Getpid()&0xffff
	t.Cleanup(func() {
		if id, err := unix.SysvShmGet(key, 0, 0); err == nil {
			unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
	})
	for _, pc := range []struct {
		name string
		p    sandbox.Policy
	}{
		{"read-only", sandbox.Policy{Level: sandbox.ReadOnly}},
		{"read-only-private", sandbox.Policy{Level: sandbox.ReadOnly, Private: true, Visible: []string{filepath.Dir(os.Args[0])}}},
		{"unlimited", sandbox.Policy{Level: sandbox.Unlimited}},
	} {
		t.Run(pc.name, func(t *testing.T) {
			// The home's charge before: after a run that makes a segment
			// and writes no page of it.
			before := homeMemory(t, shmRun(t, pc.p, key, 0))
			r := shmRun(t, pc.p, key, 20)
			first := homeMemory(t, r)
			// The kernel frees a namespace's segments after an RCU grace
			// period, off the exit of its last process: the charge goes
			// some milliseconds after the run.
			after := first
			until(t, "the run's segment is uncharged", func() bool {
				after = homeMemory(t, r)
				return after-before <= 10*mib
			})
			t.Logf("the host's home: %.1f MiB before the run wrote a 20 MiB System V segment, %.1f MiB as it ended, %.1f MiB after", float64(before)/mib, float64(first)/mib, float64(after)/mib)
		})
	}
}

// shmRun runs sysvshm KEY MIB under p and a memory limit, waits for the
// run and for its forking thread to end, checks that the host has no
// segment of key (removing one it finds), and returns the run.
func shmRun(t *testing.T, p sandbox.Policy, key, n int) *run {
	t.Helper()
	rs := buildRuleset(t, p)
	thread := -1
	defer func() {
		if thread >= 0 {
			unix.Close(thread)
		}
	}()
	r := startRun(t, Attr{Limits: Limits{MemoryMax: 64 * mib}, Account: true, Restrict: func() error {
		fd, err := unix.PidfdOpen(unix.Gettid(), unix.PIDFD_THREAD)
		if err != nil {
			return fmt.Errorf("pidfd of the forking thread: %w", err)
		}
		thread = fd
		return rs.Restrict()
	}}, "sysvshm", strconv.Itoa(key), strconv.Itoa(n))
	if st := r.wait(); st.Code != 0 {
		t.Fatalf("the tool ended %+v", st)
	}
	fds := []unix.PollFd{{Fd: int32(thread), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			break
		}
	}
	if ns := rs.Namespace(); ns != nil {
		ns.Close()
	}
	if id, err := unix.SysvShmGet(key, 0, 0); err == nil {
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		t.Errorf("the host has the run's segment %#x (id %d), want it the run's own", key, id)
	}
	return r
}
