//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// What a tree can do past its limits, as docs/limits.md (# What a run can
// still do) says. A tree whose processes run as root can write cgroupfs,
// and nothing in a tree's start takes that away (a sandbox that makes
// cgroupfs read-only inside a tree would): a process of the tree that
// moves itself into the host's cgroups leaves the tree's limits and its
// membership, so Kill and Wait's sweep no longer reach it; one that writes
// -1 to its own memory limit has none. And memory a tree writes to a tmpfs
// outlives it. These tests pin what happens today.

func init() {
	// escape HOW [MIB]: leave the tree's cgroups (HOW cgroups: move this
	// process into the host's own cgroup of cgroup v2 and of every v1
	// hierarchy) or its memory limit (HOW unlimit: write -1 to its own v1
	// memory.memsw.limit_in_bytes and memory.limit_in_bytes), print what
	// failed on stderr and exit 3 if it could not, else report, allocate
	// MIB MiB if given, print "escaped" and run until killed.
	helpers["escape"] = func(args []string) int {
		var err error
		switch args[0] {
		case "cgroups":
			err = leaveCgroups()
		case "unlimit":
			err = unlimitMemory()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "escape:", err)
			return 3
		}
		report()
		if len(args) > 1 {
			n, _ := strconv.Atoi(args[1])
			if _, err := allocMiB(n); err != nil {
				fmt.Fprintln(os.Stderr, "alloc:", err)
				return 2
			}
		}
		fmt.Println("escaped")
		hang()
		return 0
	}
	// escapethenexit ARGS...: start escape ARGS... as a child, copy its
	// lines to stdout until "escaped", then exit 0 (a CLI that ends well
	// after its tool left the tree's cgroups).
	helpers["escapethenexit"] = func(args []string) int {
		cmd := helperCmd("escape", args...)
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Println(sc.Text())
			if sc.Text() == "escaped" {
				return 0
			}
		}
		return 1
	}
}

// leaveCgroups moves the calling process into the host's cgroups (those
// of the test process, PROC_TEST_HOST_PID) in cgroup v2 and every v1
// hierarchy, by writing its pid to their cgroup.procs.
func leaveCgroups() error {
	host := os.Getenv("PROC_TEST_HOST_PID")
	cg, err := os.ReadFile("/proc/" + host + "/cgroup")
	if err != nil {
		return err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	pid := strconv.Itoa(os.Getpid())
	mount, root, err := cgroup2Mount()
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(cg), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			rel, _ := strings.CutPrefix(path, root)
			if err := writeFile(filepath.Join(mount, rel, "cgroup.procs"), pid); err != nil {
				return err
			}
		}
	}
	for _, h := range v1Hierarchies(mi, cg, "") {
		if h != nil && h.own != "" {
			if err := writeFile(filepath.Join(h.own, "cgroup.procs"), pid); err != nil {
				return err
			}
		}
	}
	return nil
}

// unlimitMemory removes the memory limit of the caller's own v1 memory
// cgroup.
func unlimitMemory() error {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	h := v1Hierarchies(mi, cg, "")[v1Memory]
	if h == nil || h.own == "" {
		return errors.New("no v1 memory cgroup")
	}
	if err := writeFile(filepath.Join(h.own, "memory.memsw.limit_in_bytes"), "-1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeFile(filepath.Join(h.own, "memory.limit_in_bytes"), "-1")
}

// cgroupsOf returns /proc/PID/cgroup.
func cgroupsOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// killAndReap kills pid, which the tree let go of, and waits until it is
// gone (a zombie at most), for at most 5 s.
func killAndReap(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 5000); n != 1 || err != nil {
		t.Errorf("pid %d did not die of SIGKILL within 5 s: %v", pid, err)
	}
}

// TestLimitsRootLeavesCgroups: run as root, a tree's process can move
// itself into the host's cgroups (v2 and every v1 hierarchy). It then
// leaves the tree's limits (it allocates twice the memory limit and is
// not killed) and its membership: the tree's Kill does not reach it,
// whether it is the root or a process the root started, and one the root
// started outlives Wait, after a Kill or after the root exited 0. One that writes -1 to its memory limit keeps its
// cgroups and loses the limit.
func TestLimitsRootLeavesCgroups(t *testing.T) {
	noLeaks(t)
	markUsed("escape", "escapethenexit")
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a process that may write cgroupfs can leave its cgroups")
	}
	requireLimits(t, Memory, Tasks)
	if testContainment == Tracking {
		t.Skip("at the tracking level a tree has no cgroup to leave")
	}
	t.Setenv("PROC_TEST_HOST_PID", strconv.Itoa(os.Getpid()))
	limits := Limits{MemoryMax: 64 * mib, Tasks: 32}
	inTree := func(pid int) bool { return strings.Contains(cgroupsOf(t, pid), "/clinvoke-") }

	t.Run("root", func(t *testing.T) {
		r := startRun(t, Attr{Limits: limits, Account: true}, "escape", "cgroups", "128")
		r.expectLine("escaped") // 128 MiB held under a limit of 64 MiB
		pid := int(r.pids[0].pid)
		if inTree(pid) {
			t.Fatalf("the root is still in the tree's cgroups:\n%s", cgroupsOf(t, pid))
		}
		rep := r.tree.Kill()
		if slices.Contains(rep.Killed, pid) || !alive(r.pids[0]) {
			t.Errorf("Kill() = %+v reached the root that left its cgroups: the documentation says it does not", rep)
		}
		killAndReap(t, pid)
		r.wait()
	})

	t.Run("child", func(t *testing.T) {
		r := startRun(t, Attr{Limits: limits, Account: true}, "spawn", "same", "wait", "escape", "cgroups", "128")
		r.expectLine("escaped")
		pid := int(r.pids[0].pid)
		if inTree(pid) {
			t.Fatalf("the child is still in the tree's cgroups:\n%s", cgroupsOf(t, pid))
		}
		r.tree.Kill()
		r.wait()
		if !alive(r.pids[0]) {
			t.Errorf("the child that left its cgroups died with the tree: the documentation says it outlives it")
		}
		killAndReap(t, pid)
	})

	t.Run("child of a CLI that ends well", func(t *testing.T) {
		r := startRun(t, Attr{Limits: limits, Account: true}, "escapethenexit", "cgroups")
		r.expectLine("escaped")
		pid := int(r.pids[0].pid)
		if st := r.wait(); st.Code != 0 {
			t.Errorf("the root ended %+v, want exit 0", st)
		}
		if !alive(r.pids[0]) {
			t.Errorf("the child that left its cgroups died in Wait's sweep: the documentation says it outlives the tree")
		}
		killAndReap(t, pid)
	})

	t.Run("unlimit", func(t *testing.T) {
		if theV1().hier[v1Memory] == nil {
			t.Skip("the memory limit is not on a v1 hierarchy here")
		}
		r := startRun(t, Attr{Limits: limits, Account: true}, "escape", "unlimit", "128")
		r.expectLine("escaped")
		u := r.tree.Usage()
		t.Logf("Usage() = %+v", u)
		if u.OOMKills != 0 || u.MemoryPeak < 128*mib {
			t.Errorf("Usage() = %+v, want a peak past the limit of 64 MiB and no OOM kill", u)
		}
		r.tree.Kill()
		r.wait()
	})
}

func init() {
	// shmwrite MIB PATH: write MIB MiB to the file PATH (a tool writing
	// scratch data), then exit 0; exit 1 if a write failed.
	helpers["shmwrite"] = func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		f, err := os.Create(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		chunk := make([]byte, 1<<20)
		for range n {
			if _, err := f.Write(chunk); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	}
	// shmcli MIB PATH: report, hold 24 MiB (a CLI's own memory), run
	// shmwrite MIB PATH as a child (its tool), print "tool ERR", then run
	// until killed.
	helpers["shmcli"] = func(args []string) int {
		report()
		if _, err := allocMiB(24); err != nil {
			fmt.Fprintln(os.Stderr, "alloc:", err)
			return 2
		}
		err := helperCmd("shmwrite", args...).Run()
		fmt.Printf("tool %v\n", err)
		hang()
		return 0
	}
}

// shmFile returns the path of a new file in /dev/shm, removed at the end
// of the test.
func shmFile(t *testing.T) string {
	t.Helper()
	f, err := os.CreateTemp("/dev/shm", "clinvoke-proc-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	return f.Name()
}

// homeMemory returns the memory charged to the host's home (the cgroup
// that holds its trees, theirs included), v1 or v2.
func homeMemory(t *testing.T, r *run) int64 {
	t.Helper()
	file := ""
	switch {
	case r.tree.sys.v1 != nil:
		file = filepath.Join(theV1().hier[v1Memory].home, "memory.usage_in_bytes")
	case r.tree.sys.cg != nil:
		file = filepath.Join(r.tree.sys.cg.home.dir, "memory.current")
	}
	n, err := readInt(file, unheld)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLimitsTmpfsOutlivesRun: memory a tree writes to a tmpfs is charged
// to it, and outlives it: after the tree is gone the host's home still
// holds the charge, which only deleting the file frees. Written past the
// memory limit, it gets the OOM killer to kill the root (the CLI) rather
// than the child writing (the tool): the killer weighs processes, and the
// file's pages belong to none.
func TestLimitsTmpfsOutlivesRun(t *testing.T) {
	noLeaks(t)
	markUsed("shmwrite", "shmcli")
	requireLimits(t, Memory)
	limits := Limits{MemoryMax: 64 * mib}

	t.Run("leftover", func(t *testing.T) {
		path := shmFile(t)
		r := startRun(t, Attr{Limits: limits, Account: true}, "shmwrite", "20", path)
		if st := r.wait(); st.Code != 0 {
			t.Fatalf("the tool ended %+v", st)
		}
		before := homeMemory(t, r)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		freed := homeMemory(t, r) - before
		t.Logf("deleting the file a finished tree left in /dev/shm freed %.1f MiB of the host's home", float64(-freed)/mib)
		if -freed < 18*mib {
			t.Errorf("deleting the 20 MiB file freed %d bytes of the home, want the file's charge", -freed)
		}
	})

	t.Run("cli killed", func(t *testing.T) {
		path := shmFile(t)
		r := startRun(t, Attr{Limits: limits, Account: true}, "shmcli", "100", path)
		r.exited()
		u := r.tree.Usage()
		st := r.wait()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("root %+v, %+v; the file left holds %.1f MiB", st, u, float64(fi.Size())/mib)
		if !u.RootOOMKilled {
			t.Errorf("Usage() = %+v, want the root (the CLI) OOM-killed", u)
		}
		if fi.Size() == 0 {
			t.Errorf("the file is empty, want what was written before the kill left behind")
		}
	})
}
