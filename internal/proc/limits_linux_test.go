//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The limits tests run on this machine's kernel, at the level the other
// tests use (PROC_TEST_CONTAINMENT): on a hybrid host the limits are held
// by cgroup v1 controllers, on a host with delegated cgroup v2 controllers
// by those. The v2 files are also checked on a fake cgroupfs (see
// TestLimitsV2Files), since a hybrid host cannot enable a v2 controller.

const mib = 1 << 20

// requireLimits fails (in CI, as root) or skips the test where this host
// cannot enforce a limit on rs.
func requireLimits(t *testing.T, rs ...Resource) {
	t.Helper()
	s := ProbeLimits(testContainment, "")
	for _, r := range rs {
		if err := s.Err(r); err != nil {
			if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
				t.Fatalf("ProbeLimits: %v: CI runs as root, where limits must work", err)
			}
			t.Skipf("no %s limit here: %v", r, err)
		}
	}
}

// hostOOMKills returns the OOM kills counted in the host's own memory
// cgroup (v1 memory.oom_control, v2 memory.events), or -1.
func hostOOMKills(t *testing.T) int64 {
	if x, err := theV1().usable(v1Memory); err == nil {
		if b, err := os.ReadFile(filepath.Join(x.own, "memory.oom_control")); err == nil {
			return keyed(b, "oom_kill")
		}
	}
	if own, err := hostCgroup(); err == nil {
		if b, err := os.ReadFile(filepath.Join(own, "memory.events")); err == nil {
			return keyed(b, "oom_kill")
		}
	}
	return -1
}

// expectLine reads the run's next line and fails unless it is want.
func (r *run) expectLine(want string) {
	r.t.Helper()
	if got := r.next(); got != want {
		r.t.Fatalf("helper printed %q, want %q", got, want)
	}
}

// TestLimitsMemoryKillsRoot: a root that allocates past its memory limit
// is OOM-killed, and the outcome says so (the root, the limit, the peak),
// while a parallel tree under the same limit and the host are unaffected.
func TestLimitsMemoryKillsRoot(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Memory)
	limits := Limits{MemoryMax: 100 * mib}
	hostKills := hostOOMKills(t)
	calm := startRun(t, Attr{Limits: limits, Account: true}, "alloc", "20")
	calm.expectLine("allocated")

	begin := time.Now()
	r := startRun(t, Attr{Limits: limits, Account: true}, "alloc", "200")
	r.exited()
	took := time.Since(begin)
	st := r.wait()
	u := r.tree.Usage()
	if st.Signal != "SIGKILL" {
		t.Errorf("root ended %+v, want SIGKILL", st)
	}
	if u.OOMKills < 1 || !u.RootOOMKilled || u.OOMOutside {
		t.Errorf("Usage() = %+v, want an OOM kill of the root under its own limit", u)
	}
	if u.Limits.MemoryMax != limits.MemoryMax {
		t.Errorf("Usage().Limits = %+v, want MemoryMax %s", u.Limits, FormatBytes(limits.MemoryMax))
	}
	if u.MemoryPeak > limits.MemoryMax || u.MemoryPeak < limits.MemoryMax*9/10 {
		t.Errorf("peak %s, want about the limit %s", FormatBytes(u.MemoryPeak), FormatBytes(limits.MemoryMax))
	}
	t.Logf("root OOM-killed at peak %s; start to the root's exit: %v", FormatBytes(u.MemoryPeak), took)
	// A recorded duration, compared generously (the target is 1 s).
	if took > 5*time.Second {
		t.Errorf("the OOM kill took %v from the start, want well under a second", took)
	}

	if isClosed(calm.tree.Exited()) {
		t.Error("the parallel tree exited")
	}
	if cu := calm.tree.Usage(); cu.OOMKills != 0 || cu.MemoryPeak < 20*mib {
		t.Errorf("the parallel tree's Usage() = %+v, want no OOM kill and its 20 MiB", cu)
	}
	if got := hostOOMKills(t); got != hostKills {
		t.Errorf("the host's cgroup counts %d OOM kills, %d before: a host process was killed", got, hostKills)
	}
}

// TestLimitsHostSafeWhileForking: on cgroup v1 the root is forked by a
// host thread that is in the tree's memory cgroup for the fork. A host
// (holding more memory than the tree) whose thread stays there while the
// tree allocates past its limit must neither be charged for the tree nor
// be killed: the tree's root is the one killed, and the thread is not the
// main thread, which owns the host's address space.
func TestLimitsHostSafeWhileForking(t *testing.T) {
	markUsed("oomhost", "alloc") // also where the test skips: its helpers are not dead code
	requireLimits(t, Memory)
	if _, err := theV1().usable(v1Memory); err != nil {
		t.Skipf("no cgroup v1 memory hierarchy: no thread joins a memory cgroup (%v)", err)
	}
	cmd := helperCmd("oomhost")
	cmd.Stdout = nil
	timer := time.AfterFunc(stuck, func() { cmd.Process.Kill() })
	out, err := cmd.Output()
	timer.Stop()
	got := string(out)
	if err != nil || !strings.Contains(got, "host survived") || !strings.Contains(got, "tree SIGKILL true") || strings.Contains(got, "main thread") {
		t.Errorf("host: %v, printed %q; want it to survive, its tree's root OOM-killed, and not the main thread forking", err, got)
	}
}

// TestLimitsV1ReadsLookedUp: every file a v1 figure reads is among the
// reads of its controller's hierarchy, which the pool's filler looks up
// in the cgroups it makes ahead, and is there in a new cgroup: a misspelt
// or misplaced name would be looked up in vain.
func TestLimitsV1ReadsLookedUp(t *testing.T) {
	h := theV1()
	checked := 0
	for _, c := range controllers {
		for _, f := range c.readsV1() {
			x, err := h.usable(f.ctl)
			if err != nil || f.name == pidsPeak && !h.hasPidsPeak() {
				continue
			}
			if !slices.Contains(x.reads, f.name) {
				t.Errorf("the %s hierarchy's reads %q lack %s", v1Names[f.ctl], x.reads, f.name)
			}
			dir := filepath.Join(x.home, h.runName())
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err = os.Stat(filepath.Join(dir, f.name))
			unix.Rmdir(dir)
			if err != nil {
				t.Errorf("a new v1 %s cgroup has no %s: %v", v1Names[f.ctl], f.name, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Skip("no cgroup v1 hierarchy is usable here")
	}
}

// TestLimitsMemoryKillsTool: a tool (the root's child) that allocates past
// the tree's limit is OOM-killed, and the root lives on: the outcome is a
// warning (not Root), also after the root is killed by Kill.
func TestLimitsMemoryKillsTool(t *testing.T) {
	noLeaks(t)
	markUsed("spawnalloc") // also where the test skips
	requireLimits(t, Memory)
	limits := Limits{MemoryMax: 100 * mib}
	r := startRun(t, Attr{Limits: limits, Account: true}, "spawnalloc", "200")
	r.expectLine("child signal: killed")
	u := r.tree.Usage()
	if isClosed(r.tree.Exited()) {
		t.Fatal("the root exited")
	}
	if u.OOMKills != 1 || u.RootOOMKilled || u.OOMOutside || u.Limits.MemoryMax != limits.MemoryMax {
		t.Errorf("Usage() = %+v, want one OOM kill under the tree's own limit, not the root", u)
	}
	r.tree.Kill()
	r.wait()
	if u := r.tree.Usage(); u.RootOOMKilled {
		t.Errorf("after Kill, Usage() = %+v: the root was killed by Kill, not the limit", u)
	}
}

// TestLimitsMemoryPeak: a tree that allocates a known amount under its
// limit reports that peak, within 10%.
func TestLimitsMemoryPeak(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Memory)
	const want = 200 * mib
	r := startRun(t, Attr{Limits: Limits{MemoryMax: 512 * mib}, Account: true}, "alloc", "200")
	r.expectLine("allocated")
	u := r.tree.Usage()
	r.tree.Kill()
	r.wait()
	final := r.tree.Usage()
	t.Logf("peak %s while running, %s in all (allocated %s)", FormatBytes(u.MemoryPeak), FormatBytes(final.MemoryPeak), FormatBytes(want))
	for _, got := range []int64{u.MemoryPeak, final.MemoryPeak} {
		if d := got - want; d < -want/10 || d > want/10 {
			t.Errorf("MemoryPeak = %s, want %s within 10%%", FormatBytes(got), FormatBytes(want))
		}
	}
	if u.MemorySampled || u.OOMKills != 0 {
		t.Errorf("Usage() = %+v, want a controller's figure and no OOM kill", u)
	}
}

// TestLimitsCountsReadAlone: Counts reads the counters of what the limits
// did and no figure; a tree's figures are read once on its way out (the
// final reading), and neither Usage nor Counts reads anything after Wait.
func TestLimitsCountsReadAlone(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Memory)
	r := startRun(t, Attr{Limits: Limits{MemoryMax: 512 * mib}, Account: true}, "alloc", "20")
	r.expectLine("allocated")
	a := r.tree.sys.acct
	reads := func() (int, int) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.reads, a.counts
	}
	full, _ := reads()
	for range 2 {
		if u := r.tree.Counts(); u.MemoryPeak != 0 || u.CPU != 0 || u.OOMKills != 0 || u.Limits.MemoryMax != 512*mib {
			t.Errorf("Counts() = %+v, want the limits, no figure and no OOM kill", u)
		}
	}
	if f, c := reads(); f != full || c != 2 {
		t.Errorf("after two Counts: %d full readings and %d of the counters, want %d and 2", f, c, full)
	}
	if u := r.tree.Usage(); u.MemoryPeak < 20*mib {
		t.Errorf("Usage() = %+v, want the peak of 20 MiB allocated", u)
	}
	full++
	r.tree.Kill()
	r.wait()
	u := r.tree.Usage()
	if c := r.tree.Counts(); c != u {
		t.Errorf("after Wait, Counts() = %+v, want Usage()'s %+v", c, u)
	}
	if f, c := reads(); f != full+1 || c != 2 {
		t.Errorf("after Wait, Usage and Counts: %d full readings and %d of the counters, want %d (the final one) and 2", f, c, full+1)
	}
}

// TestLimitsCgroupsRemoved: a tree's cgroup v1 cgroups are removed once
// it is reaped.
func TestLimitsCgroupsRemoved(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Memory, Tasks)
	r := startRun(t, Attr{Account: true, Limits: Limits{MemoryMax: 64 * mib, Tasks: 64}}, "exit", "0")
	var dirs []string
	if v1 := r.tree.sys.v1; v1 != nil {
		dirs = v1.dirs()
	}
	r.exited()
	r.tree.Kill()
	r.wait()
	if len(dirs) == 0 {
		t.Skip("the limits are on cgroup v2: no v1 cgroup to remove")
	}
	until(t, "the tree's v1 cgroups are removed", func() bool {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}

// markedPids returns the live processes whose environment holds marker.
func markedPids(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if p, err := readStat(int32(pid)); err == nil && !p.zombie() {
			out = append(out, pid)
		}
	}
	return out
}

// TestLimitsForkBomb: a fork bomb under a task limit is held to it, the
// refused forks are counted, and Kill leaves nothing of it.
func TestLimitsForkBomb(t *testing.T) {
	noLeaks(t)
	requireLimits(t, Tasks)
	forkBomb(t, nil)
}

// forkBomb runs TestLimitsForkBomb's fork bomb, its root's thread
// restricted by restrict when it is not nil.
func forkBomb(t *testing.T, restrict func() error) {
	markUsed("perl")
	const tasks = 32
	m := marker(t)
	r := startRun(t, Attr{Limits: Limits{Tasks: tasks}, Account: true, Marker: m, Restrict: restrict}, "perl", "forkbomb")
	r.expectLine("bombing")
	until(t, "a fork is refused", func() bool { return r.tree.Usage().ForksRefused > 0 })
	begin := time.Now()
	rep := r.tree.Kill()
	took := time.Since(begin)
	if len(rep.Survivors) > 0 {
		t.Errorf("Kill() left survivors %v", rep.Survivors)
	}
	r.wait()
	if left := markedPids(m); len(left) > 0 {
		t.Errorf("processes of the fork bomb left: %v", left)
		for _, pid := range left {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
	u := r.tree.Usage()
	// The thread that forks the root is in the tree's cgroup for the
	// fork (cgroup v1): the peak may count it.
	if u.TasksPeak > tasks+1 || u.TasksPeak < tasks/2 {
		t.Errorf("TasksPeak = %d, want at most the limit %d", u.TasksPeak, tasks)
	}
	if u.ForksRefused < 1 || u.OOMKills != 0 || u.Limits.Tasks != tasks {
		t.Errorf("Usage() = %+v, want forks refused by the task limit %d", u, tasks)
	}
	t.Logf("%d forks refused (peak %d tasks); Kill took %v (%d killed)", u.ForksRefused, u.TasksPeak, took, len(rep.Killed))
	if took > 10*time.Second {
		t.Errorf("Kill took %v, want well under 2 s", took)
	}
}

// TestLimitsCPU: a CPU hog held to half a core uses at most 0.55 CPU
// seconds per second over 3 s.
func TestLimitsCPU(t *testing.T) {
	noLeaks(t)
	markUsed("spin") // also where the test skips
	requireLimits(t, CPU)
	r := startRun(t, Attr{Limits: Limits{CPU: 0.5}, Account: true}, "spin")
	r.expectLine("spinning")
	u0, t0 := r.tree.Usage(), time.Now()
	// The measurement's window, not a wait for an event.
	time.Sleep(3 * time.Second)
	u1, t1 := r.tree.Usage(), time.Now()
	rate := (u1.CPU - u0.CPU).Seconds() / t1.Sub(t0).Seconds()
	t.Logf("%.3f CPU-seconds per second over %v", rate, t1.Sub(t0))
	if rate > 0.55 {
		t.Errorf("the hog used %.3f CPU-seconds per second, want at most 0.55", rate)
	}
	if rate < 0.1 {
		t.Errorf("the hog used %.3f CPU-seconds per second: did it run?", rate)
	}
	if u1.CPUSampled {
		t.Errorf("Usage() = %+v, want CPU time from a controller", u1)
	}
}

// TestLimitsProbeMatchesStart: each limit ProbeLimits says can be enforced
// starts, and each it says cannot fails with its *LimitUnavailableError before
// anything starts.
func TestLimitsProbeMatchesStart(t *testing.T) {
	noLeaks(t)
	s := ProbeLimits(testContainment, "")
	t.Logf("ProbeLimits: %+v", s)
	for _, tt := range []struct {
		r Resource
		l Limits
	}{
		{Memory, Limits{MemoryMax: 256 * mib}},
		{MemoryHigh, Limits{MemoryHigh: 256 * mib}},
		{Tasks, Limits{Tasks: 64}},
		{CPU, Limits{CPU: 1}},
	} {
		t.Run(tt.r.String(), func(t *testing.T) {
			before := childrenOfHost()
			cmd := helperCmd("exit", "0")
			tree, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Limits: tt.l, Containment: testContainment})
			if want := s.Err(tt.r); want == nil {
				if err != nil {
					t.Fatalf("Start(%+v) error = %v, want a tree: ProbeLimits said it can", tt.l, err)
				}
				markUsed("exit")
				<-tree.Exited()
				tree.Kill()
				tree.Wait()
				return
			}
			var ue *LimitUnavailableError
			if !errors.Is(err, ErrLimitUnavailable) || !errors.As(err, &ue) || ue.Resource != tt.r {
				t.Fatalf("Start(%+v) error = %v, want a *LimitUnavailableError for %v", tt.l, err, tt.r)
			}
			if ue.Reason == "" || ue.Fix == "" {
				t.Errorf("%v: want a reason and a fix", ue)
			}
			if after := childrenOfHost(); len(after) > len(before) {
				t.Errorf("children %v after a refused Start, %v before", after, before)
			}
		})
	}
}

// childrenOfHost lists the test process's children.
func childrenOfHost() []string {
	var out []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// TestLimitsWithoutControllers: where no controller exists, a limit fails
// with a *LimitUnavailableError naming it, and an accounted tree's figures are
// sampled from /proc: the peak of a known allocation within 10% of the
// resident memory the helper reports, CPU time, tasks.
func TestLimitsWithoutControllers(t *testing.T) {
	noLeaks(t)
	tune := tuned(func(tu *tuning) { tu.noControllers = true; tu.trackEvery = 20 * time.Millisecond })
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			cmd := helperCmd("exit", "0")
			_, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Containment: level, tune: tune, Limits: Limits{MemoryMax: 64 * mib}})
			var ue *LimitUnavailableError
			if !errors.As(err, &ue) || ue.Resource != Memory {
				t.Fatalf("Start with a memory limit and no controller: error = %v, want a *LimitUnavailableError", err)
			}

			r := startRun(t, Attr{Containment: level, tune: tune, Account: true}, "alloc", "100")
			r.expectLine("allocated")
			rss := residentOf(t, r.tree.Pid())
			until(t, "a sample sees the allocation", func() bool { return r.tree.Usage().MemoryPeak >= rss-mib })
			u := r.tree.Usage()
			if !u.MemorySampled || !u.TasksSampled {
				t.Errorf("Usage() = %+v, want sampled memory and tasks", u)
			}
			if d := u.MemoryPeak - 100*mib; d < 0 || d > rss-100*mib+10*mib {
				t.Errorf("sampled MemoryPeak = %s, want the 100 MiB allocated plus the helper's own (resident %s in all) within 10 MiB", FormatBytes(u.MemoryPeak), FormatBytes(rss))
			}
			if u.TasksPeak < 1 {
				t.Errorf("sampled TasksPeak = %d, want at least the root's threads", u.TasksPeak)
			}
			r.tree.Kill()
			r.wait()
			if f := r.tree.Usage(); f.CPU <= 0 || (level == Tracking) != f.CPUSampled {
				t.Errorf("final Usage() = %+v, want CPU time (sampled at the tracking level only)", f)
			}
		})
	}
}

// residentOf returns the resident set size of pid, from its stat line.
func residentOf(t *testing.T, pid int) int64 {
	p, err := readStat(int32(pid))
	if err != nil {
		t.Fatal(err)
	}
	return int64(p.rss) * int64(pageSize)
}

// TestLimitsMarks: Since reports what a tree used after a Mark: the peak
// of a turn that allocated less than an earlier one is the turn's own,
// while Usage keeps the whole run's peak.
func TestLimitsMarks(t *testing.T) {
	noLeaks(t)
	tunes := map[string]*tuning{"sampled": tuned(func(tu *tuning) { tu.noControllers = true; tu.trackEvery = 20 * time.Millisecond })}
	if ProbeLimits(testContainment, "").Memory == nil {
		tunes["controllers"] = nil
	}
	for name, tune := range tunes {
		t.Run(name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			r := startRun(t, Attr{Account: true, Stdin: pr, tune: tune}, "allocator")
			pr.Close()
			turn := func(cmd string, mib64 int64) Usage {
				m := r.tree.Mark()
				fmt.Fprintln(pw, cmd)
				r.expectLine("allocated")
				if tune != nil {
					until(t, "a sample sees the turn", func() bool { return r.tree.Since(m).MemoryPeak >= mib64*mib })
				}
				return r.tree.Since(m)
			}
			first := turn("alloc 80", 80)
			fmt.Fprintln(pw, "free")
			r.expectLine("freed")
			second := turn("alloc 20", 20)
			whole := r.tree.Usage()
			t.Logf("first turn %s, second %s, whole %s", FormatBytes(first.MemoryPeak), FormatBytes(second.MemoryPeak), FormatBytes(whole.MemoryPeak))
			if first.MemoryPeak < 80*mib || second.MemoryPeak < 20*mib || second.MemoryPeak >= 80*mib {
				t.Errorf("turn peaks %s and %s, want at least 80 MiB, then at least 20 MiB but less than 80", FormatBytes(first.MemoryPeak), FormatBytes(second.MemoryPeak))
			}
			if whole.MemoryPeak < first.MemoryPeak {
				t.Errorf("Usage().MemoryPeak = %s, below the first turn's %s", FormatBytes(whole.MemoryPeak), FormatBytes(first.MemoryPeak))
			}
			if first.CPU < 0 || second.CPU < 0 || whole.CPU < first.CPU+second.CPU {
				t.Errorf("CPU: turns %v and %v, whole %v", first.CPU, second.CPU, whole.CPU)
			}
		})
	}
}

// openFDs counts the test process's open descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // the directory's own
}

// TestLimitsDescriptorsPerTree: a running tree holds at most one
// descriptor (its root's pidfd, at the cgroup level), with limits and
// accounting or without; one whose root has exited holds none.
func TestLimitsDescriptorsPerTree(t *testing.T) {
	noLeaks(t)
	for _, a := range []Attr{{}, {Account: true, Limits: Limits{MemoryMax: 64 * mib, Tasks: 64}}} {
		if !a.Limits.IsZero() && ProbeLimits(testContainment, "").Memory != nil {
			continue
		}
		t.Run(fmt.Sprintf("account=%v", a.Account), func(t *testing.T) {
			const n = 20
			before := openFDs(t)
			var trees []*Tree
			for range n {
				a := a
				a.Path, a.Args, a.Containment = "/bin/sleep", []string{"sleep", "1000"}, testContainment
				tree, err := Start(&a)
				if err != nil {
					t.Fatal(err)
				}
				trees = append(trees, tree)
			}
			running := openFDs(t) - before
			for _, tree := range trees {
				tree.Kill()
				<-tree.Exited()
			}
			until(t, "the exit watchers close their pidfds", func() bool { return openFDs(t)-before <= 0 })
			for _, tree := range trees {
				tree.Wait()
			}
			t.Logf("%d trees hold %d descriptors", n, running)
			if running > n {
				t.Errorf("%d running trees hold %d descriptors, want at most one each", n, running)
			}
		})
	}
}

// TestLimitsExhausted: running out of descriptors makes Start fail with
// an *ExhaustedError naming the limit and how to raise it; a fork refused
// for want of processes (EAGAIN) is one too, naming the host's process
// limits.
func TestLimitsExhausted(t *testing.T) {
	noLeaks(t)
	cmd := helperCmd("exit", "0")
	markUsed("exit")
	a := &Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Containment: testContainment}
	err := withFewDescriptors(t, 0, func() error { _, err := Start(a); return err })
	var ee *ExhaustedError
	if !errors.Is(err, ErrExhausted) || !errors.As(err, &ee) || ee.Resource != "descriptors" || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Errorf("Start without descriptors: error = %v, want an *ExhaustedError naming RLIMIT_NOFILE", err)
	}

	err = Exhausted(&os.SyscallError{Syscall: "clone3", Err: unix.EAGAIN})
	if !errors.Is(err, ErrExhausted) || !errors.As(err, &ee) || ee.Resource != "processes" || !errors.Is(err, unix.EAGAIN) ||
		!strings.Contains(err.Error(), "kernel.pid_max") || !strings.Contains(err.Error(), "RLIMIT_NPROC") {
		t.Errorf("Exhausted(EAGAIN) = %v, want an *ExhaustedError naming RLIMIT_NPROC and kernel.pid_max", err)
	}
}

// TestLimitsHostMemory: a memory limit on the host's trees together
// (SetHostLimits) is held by the kernel: trees without limits of their
// own that together allocate past it see one of them OOM-killed, by a
// limit that is not their own.
func TestLimitsHostMemory(t *testing.T) {
	noLeaks(t)
	if err := SetHostLimits("", Limits{MemoryMax: 180 * mib}); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatal(err)
		}
		t.Skipf("no memory limit for the host here: %v", err)
	}
	t.Cleanup(func() {
		if err := SetHostLimits("", Limits{}); err != nil {
			t.Error(err)
		}
	})
	if testContainment == Tracking && ProbeLimits(Cgroup, "").HostMemory == nil && theV1().hostNeed() == 0 {
		t.Skip("the host's limit is on its cgroup v2 home, which holds cgroup-level trees only")
	}
	a := startRun(t, Attr{Account: true}, "alloc", "100")
	a.expectLine("allocated")
	b := startRun(t, Attr{Account: true}, "alloc", "100")
	// The OOM killer takes the tree's process that uses the most memory:
	// either root.
	killed, other := a, b
	select {
	case <-a.tree.Exited():
	case <-b.tree.Exited():
		killed, other = b, a
	case <-time.After(stuck):
		t.Fatal("neither root exited: the host's limit does not hold them")
	}
	killed.wait()
	u := killed.tree.Usage()
	if !u.RootOOMKilled || !u.OOMOutside || u.OOMKills < 1 || u.ForksRefused != 0 {
		t.Errorf("the killed tree's Usage() = %+v, want its root OOM-killed by a limit not its own", u)
	}
	t.Logf("root OOM-killed by the host's limit at peak %s", FormatBytes(u.MemoryPeak))
	if isClosed(other.tree.Exited()) {
		// The kernel may take a second victim when the first one's
		// memory is not yet given back as the other keeps faulting
		// (seen about once in 20 runs with v1 memory controllers): it
		// must have been taken by the same host limit, not by anything
		// of its own.
		other.wait()
		if o := other.tree.Usage(); !o.RootOOMKilled || !o.OOMOutside {
			t.Errorf("the other root exited too, Usage() = %+v, want it running or OOM-killed by the host's limit", o)
		} else {
			t.Logf("the kernel took the other root too, by the host's limit, at peak %s", FormatBytes(o.MemoryPeak))
		}
	}
}

// TestLimitsManyTrees runs many trees at once at the cgroup level, each
// holding one descriptor (the root's pidfd): 100 by default, as many as
// PROC_TEST_MANY says (10000 takes about a minute on two cores). The
// host's descriptor limit is raised for it as far as the host allows.
func TestLimitsManyTrees(t *testing.T) {
	noLeaks(t)
	if lvl, err := Probe(Cgroup, ""); lvl != Cgroup {
		t.Skipf("no cgroup level here (%v): a tracking-level tree holds a thread, and Go allows 10000", err)
	}
	n := 100
	if s := os.Getenv("PROC_TEST_MANY"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("PROC_TEST_MANY=%q: %v", s, err)
		}
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	saved := lim
	if want := uint64(n) + 1024; lim.Cur < want {
		lim.Cur, lim.Max = want, max(lim.Max, want)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Skipf("cannot raise RLIMIT_NOFILE to %d for %d trees: %v", want, n, err)
		}
		t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &saved) })
	}
	before := openFDs(t)
	begin := time.Now()
	trees := make([]*Tree, 0, n)
	t.Cleanup(func() {
		for _, tree := range trees {
			tree.Kill()
			tree.Wait()
		}
	})
	for i := range n {
		tree, err := Start(&Attr{Path: "/bin/sleep", Args: []string{"sleep", "1000"}, Containment: Cgroup})
		if err != nil {
			t.Fatalf("Start of tree %d of %d: %v", i+1, n, err)
		}
		trees = append(trees, tree)
	}
	started := time.Since(begin)
	held := openFDs(t) - before
	var killed []procKey
	for _, tree := range trees {
		if p, err := readStat(int32(tree.Pid())); err == nil && !p.zombie() {
			killed = append(killed, procKey{p.pid, p.start})
		}
	}
	if len(killed) != n {
		t.Errorf("%d of %d roots are running", len(killed), n)
	}
	begin = time.Now()
	errc := make(chan error, n)
	sem := make(chan struct{}, 64)
	for _, tree := range trees {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			rep := tree.Kill()
			if _, err := tree.Wait(); err != nil || len(rep.Survivors) > 0 {
				errc <- fmt.Errorf("tree %d: %v, survivors %v", tree.Pid(), err, rep.Survivors)
				return
			}
			errc <- nil
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	trees = nil
	t.Logf("%d trees: started in %v, %d descriptors held (%.2f per tree), killed and reaped in %v", n, started, held, float64(held)/float64(n), time.Since(begin))
	if held > n {
		t.Errorf("%d trees hold %d descriptors, want at most one each", n, held)
	}
	assertGone(t, killed)
}

// BenchmarkLimitsStart starts, awaits and reaps a tree of /bin/true: as
// is, accounted, and accounted with limits (memory, tasks, CPU), at the
// level of the other tests. Compare the sub-benchmarks' ns/op.
func BenchmarkLimitsStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		a    Attr
	}{
		{"plain", Attr{}},
		{"account", Attr{Account: true}},
		{"limits", Attr{Account: true, Limits: Limits{MemoryMax: 512 * mib, Tasks: 256, CPU: 1}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if !bc.a.Limits.IsZero() {
				s := ProbeLimits(testContainment, "")
				if s.Memory != nil || s.Tasks != nil || s.CPU != nil {
					b.Skip("no limits here")
				}
			}
			for b.Loop() {
				a := bc.a
				a.Path, a.Args, a.Containment = "/bin/true", []string{"true"}, testContainment
				tree, err := Start(&a)
				if err != nil {
					b.Fatal(err)
				}
				<-tree.Exited()
				tree.Kill()
				tree.Wait()
			}
		})
	}
}

// BenchmarkLimitsUsage reads a running accounted tree's usage.
func BenchmarkLimitsUsage(b *testing.B) { benchRead(b, (*Tree).Usage) }

// BenchmarkLimitsCounts reads a running accounted tree's counters alone,
// as a look for a limit's warning does.
func BenchmarkLimitsCounts(b *testing.B) { benchRead(b, (*Tree).Counts) }

func benchRead(b *testing.B, read func(*Tree) Usage) {
	tree, err := Start(&Attr{Path: "/bin/sleep", Args: []string{"sleep", "1000"}, Account: true, Containment: testContainment})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		tree.Kill()
		tree.Wait()
	}()
	for b.Loop() {
		read(tree)
	}
}
