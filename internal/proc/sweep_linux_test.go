//go:build linux

package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sessionRun is a run of the helper session: a root that keeps a helper
// across turns and starts three processes per turn, told on its stdin.
type sessionRun struct {
	*run
	w      *os.File // the root's stdin
	root   procKey
	helper procKey
}

// startSession starts the helper session at level and waits for the root
// and its helper to report.
func startSession(t testing.TB, level Containment) *sessionRun {
	t.Helper()
	return startSessionTuned(t, level, nil)
}

// startSessionTuned is startSession with tune for the tree.
func startSessionTuned(t testing.TB, level Containment, tune *tuning) *sessionRun {
	t.Helper()
	markUsed("session", "hang", "spawn")
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := startRun(t, Attr{Containment: level, Marker: marker(t), Stdin: in, tune: tune}, "session")
	in.Close()
	t.Cleanup(func() { w.Close() }) // before the run's cleanup kills the tree
	if got := r.tree.Containment(); got != level {
		t.Fatalf("Containment() = %v, want %v", got, level)
	}
	r.awaitPids(2)
	s := &sessionRun{run: r, w: w}
	for _, p := range r.pids {
		if int(p.pid) == r.tree.Pid() {
			s.root = p
		} else {
			s.helper = p
		}
	}
	return s
}

// turn starts a turn's three processes and returns them, in the order
// they reported, once the processes that started the daemons have
// exited (MODE held: the five processes, intermediates included).
func (s *sessionRun) turn(mode string) []procKey {
	s.t.Helper()
	n := len(s.pids)
	if _, err := fmt.Fprintf(s.w, "turn %s\n", mode); err != nil {
		s.t.Fatal(err)
	}
	if l := s.next(); l != "turn started" {
		s.t.Fatalf("session helper said %q, want \"turn started\"", l)
	}
	want := 3
	if mode == "held" {
		want = 5
	}
	s.awaitPids(n + want)
	return slices.Clone(s.pids[n:])
}

// pidsOf returns the pids of ps, sorted.
func pidsOf(ps []procKey) []int {
	var pids []int
	for _, p := range ps {
		pids = append(pids, int(p.pid))
	}
	slices.Sort(pids)
	return pids
}

// sorted returns a sorted copy of pids.
func sorted(pids []int) []int {
	pids = slices.Clone(pids)
	slices.Sort(pids)
	return pids
}

// TestSweepSince: a tree whose root keeps a helper across turns; each turn
// starts a grandchild in the root's group, a setsid daemon and an env -i
// daemon (as the root's children, or orphaned by an intermediate that
// exited). SweepSince kills exactly those three and leaves the root and
// the helper running, twice over; a sweep after a turn that started
// nothing kills nothing. At the cgroup level nothing scans /proc. At the
// tracking level the orphaned env -i daemon (no marker, no parent link)
// is found only if the tracker recorded it while its parent lived: a
// documented miss, killed here by pid.
func TestSweepSince(t *testing.T) {
	noLeaks(t)
	for _, mode := range []string{"children", "orphans"} {
		for _, level := range levels(t) {
			t.Run(mode+"/"+level.String(), func(t *testing.T) {
				ts := newTestScanner()
				scans := countScans(t, ts)
				s := startSessionTuned(t, level, ts.tuned(nil))
				for cycle := 1; cycle <= 2; cycle++ {
					b := s.tree.Baseline()
					if got, want := b.Pids(), pidsOf([]procKey{s.root, s.helper}); !slices.Equal(got, want) {
						t.Fatalf("cycle %d: Baseline().Pids() = %v, want the root and the helper %v", cycle, got, want)
					}
					turn := s.turn(mode)
					// The env -i daemon is the one of the three whose
					// environment holds no marker.
					var envi procKey
					for _, p := range turn {
						if env, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.pid)) + "/environ"); err == nil && len(env) > 0 && !hasMarker(env) {
							envi = p
						}
					}
					if envi.pid == 0 {
						t.Fatalf("cycle %d: no process of the turn %v lacks the marker", cycle, turn)
					}
					rep := s.tree.SweepSince(b)
					want := pidsOf(turn)
					if level == Tracking && mode == "orphans" {
						if !slices.Contains(rep.Killed, int(envi.pid)) && alive(envi) {
							t.Logf("cycle %d: tracking missed the orphaned env -i daemon %d, as documented; killing it by pid", cycle, envi.pid)
							killMissed(t, envi)
							want = slices.DeleteFunc(want, func(pid int) bool { return pid == int(envi.pid) })
						}
					}
					if got := sorted(rep.Killed); !slices.Equal(got, want) {
						t.Errorf("cycle %d: SweepSince().Killed = %v, want the turn's %v", cycle, got, want)
					}
					if len(rep.Survivors) > 0 {
						t.Errorf("cycle %d: SweepSince().Survivors = %v, want none", cycle, rep.Survivors)
					}
					for _, p := range turn {
						if alive(p) {
							t.Errorf("cycle %d: the turn's %d is alive after SweepSince", cycle, p.pid)
						}
					}
					for _, p := range []procKey{s.root, s.helper} {
						if !alive(p) {
							t.Fatalf("cycle %d: %d of the baseline is gone after SweepSince", cycle, p.pid)
						}
					}
				}
				rep := s.tree.SweepSince(s.tree.Baseline())
				if len(rep.Killed) > 0 || len(rep.Survivors) > 0 {
					t.Errorf("SweepSince() with nothing new = %+v, want nothing killed", rep)
				}
				if level == Cgroup {
					if n := scans.Load(); n != 0 {
						t.Errorf("baselines and sweeps at the cgroup level scanned /proc %d times, want none", n)
					}
				}
				if !alive(s.root) || !alive(s.helper) {
					t.Fatal("the root or its helper is gone")
				}
				rep = s.tree.Kill()
				assertKilled(t, rep, pidsOf([]procKey{s.root, s.helper}))
				s.wait()
			})
		}
	}
}

// killMissed kills p, which a sweep missed, through a pidfd, waits until it
// has exited and, if it is the test process's child (an orphan adopted by
// the test process, a subreaper since TestSubreaper), reaps it.
func killMissed(t *testing.T, p procKey) {
	t.Helper()
	fd, err := unix.PidfdOpen(int(p.pid), 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	cur, err := readStat(p.pid)
	if err != nil || cur.start != p.start {
		return
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	awaitExit(t, p)
	if cur.ppid == int32(os.Getpid()) {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED, nil); err != nil {
			t.Errorf("reaping %d: %v", p.pid, err)
		}
	}
}

// TestSweepForkingTurn: a turn's process keeps forking children into
// sessions of their own with cleared environments while the sweep runs.
// The sweep kills it and every child it made (at the cgroup level by
// listing again after each round of kills, at the tracking level by
// stopping the members before killing them), and leaves the root and the
// helper running.
func TestSweepForkingTurn(t *testing.T) {
	noLeaks(t)
	markUsed("forker")
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			token := fmt.Sprintf("proc-test-sweep-fork-%d-%d", os.Getpid(), time.Now().UnixNano())
			t.Cleanup(func() {
				for _, pid := range withArg(token) {
					t.Errorf("child %d escaped SweepSince and Kill", pid)
					unix.Kill(pid, unix.SIGKILL)
					var info unix.Siginfo
					unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
				}
			})
			s := startSession(t, level)
			b := s.tree.Baseline()
			if _, err := fmt.Fprintf(s.w, "turn forker %s\n", token); err != nil {
				t.Fatal(err)
			}
			got := []string{s.next(), s.next()}
			slices.Sort(got)
			if !slices.Equal(got, []string{"forking", "turn started"}) {
				t.Fatalf("lines %q, want forking and turn started", got)
			}
			rep := s.tree.SweepSince(b)
			if len(rep.Survivors) > 0 {
				t.Errorf("SweepSince().Survivors = %v, want none", rep.Survivors)
			}
			forker := s.pids[len(s.pids)-1]
			if !slices.Contains(rep.Killed, int(forker.pid)) {
				t.Errorf("SweepSince().Killed = %v, want it to hold the forker %d", rep.Killed, forker.pid)
			}
			// A child still in exec shows its argv a moment later.
			time.Sleep(50 * time.Millisecond)
			if left := withArg(token); len(left) > 0 {
				t.Errorf("children %v of the forker survived SweepSince (report %+v)", left, rep)
			}
			if !alive(s.root) || !alive(s.helper) {
				t.Error("the root or its helper is gone")
			}
		})
	}
}

// TestSweepAfterSnapshot: a turn's daemons are started by intermediates
// that live until the turn is interrupted, then exit, orphaning them; one
// daemon has a cleared environment. A session that calls Snapshot when
// the cancel begins, before the interrupt, has their parent links
// recorded, so the sweep finds even the env -i orphan at the tracking
// level (the cgroup level needs no Snapshot: it is a no-op there).
func TestSweepAfterSnapshot(t *testing.T) {
	noLeaks(t)
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			s := startSession(t, level)
			b := s.tree.Baseline()
			turn := s.turn("held")
			// The cancel begins: record, then interrupt the tool runners.
			s.tree.Snapshot()
			var left, runners []procKey // the grandchild and daemons; the intermediates
			for _, p := range turn {
				argv, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.pid)) + "/cmdline")
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(splitEnv(argv), "hangint") {
					runners = append(runners, p)
				} else {
					left = append(left, p)
				}
			}
			if len(runners) != 2 || len(left) != 3 {
				t.Fatalf("the turn %v: intermediates %v, want 2 of 5", turn, runners)
			}
			for _, p := range runners {
				unix.Kill(int(p.pid), unix.SIGINT)
				awaitExit(t, p)
			}
			for _, p := range left {
				until(t, "the daemons are orphaned", func() bool {
					st, err := readStat(p.pid)
					return err == nil && !slices.ContainsFunc(runners, func(r procKey) bool { return r.pid == st.ppid })
				})
			}
			rep := s.tree.SweepSince(b)
			for _, d := range left {
				if !slices.Contains(rep.Killed, int(d.pid)) || alive(d) {
					t.Errorf("the turn's %d: killed %v, alive %v after SweepSince (report %+v)", d.pid, slices.Contains(rep.Killed, int(d.pid)), alive(d), rep)
				}
			}
			if !alive(s.root) || !alive(s.helper) {
				t.Error("the root or its helper is gone")
			}
		})
	}
}

// splitEnv splits an environ (or cmdline) file into its entries.
func splitEnv(b []byte) []string {
	var env []string
	for len(b) > 0 {
		i := slices.Index(b, 0)
		if i < 0 {
			i = len(b)
		}
		env = append(env, string(b[:i]))
		b = b[min(i+1, len(b)):]
	}
	return env
}

// hasMarker reports whether an environ file holds a test's marker.
func hasMarker(b []byte) bool {
	for _, kv := range splitEnv(b) {
		if len(kv) > len("PROC_TEST_MARKER=") && kv[:len("PROC_TEST_MARKER=")] == "PROC_TEST_MARKER=" {
			return true
		}
	}
	return false
}

// TestSweepZeroBaseline: the zero Baseline spares only the root, and a
// Baseline of another tree is refused.
func TestSweepZeroBaseline(t *testing.T) {
	noLeaks(t)
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			s := startSession(t, level)
			rep := s.tree.SweepSince(Baseline{})
			if got, want := rep.Killed, []int{int(s.helper.pid)}; !slices.Equal(got, want) {
				t.Errorf("SweepSince(Baseline{}).Killed = %v, want the helper %v", got, want)
			}
			if !alive(s.root) || alive(s.helper) {
				t.Errorf("after SweepSince(Baseline{}): root alive %v (want true), helper alive %v (want false)", alive(s.root), alive(s.helper))
			}
			other := startSession(t, level)
			func() {
				defer func() {
					if recover() == nil {
						t.Error("SweepSince(another tree's Baseline) did not panic")
					}
				}()
				s.tree.SweepSince(other.tree.Baseline())
			}()
		})
	}
}

// TestBaselineSpares: a process of the baseline is spared only with its
// start time; one that reuses its pid is not, unless it started before
// the baseline was taken.
func TestBaselineSpares(t *testing.T) {
	b := Baseline{members: []member{{pid: 10, start: 500}, {pid: 20, start: 700}}, since: 1000}
	for _, tt := range []struct {
		pid   int
		start uint64
		want  bool
	}{
		{10, 500, true},   // in the baseline
		{20, 700, true},   // in the baseline
		{10, 1000, false}, // pid 10 reused after the baseline
		{10, 1500, false}, // the same, later
		{30, 1200, false}, // new
		{30, 999, true},   // started before the baseline, missed by it
		{20, 800, true},   // reused before the baseline was taken: not new
		{0, 1000, false},  // new
		{10, 499, true},   // older than the baseline
		{40, 1000, false}, // the baseline's tick: new
		{40, 0, true},     // unknown start: spared
		{-1, 1000, false}, // not a pid
		{10, 1 << 62, false},
	} {
		if got := b.spares(tt.pid, tt.start); got != tt.want {
			t.Errorf("spares(%d, %d) = %v, want %v", tt.pid, tt.start, got, tt.want)
		}
	}
	if got := (Baseline{}).spares(1, 0); got {
		t.Errorf("the zero Baseline spares(1, 0) = true, want false")
	}
}

// TestSweepReusedPid: the helper of the baseline exits and a process of
// the next turn is given its pid (set through ns_last_pid); the sweep
// kills it, since its start time is not the helper's.
func TestSweepReusedPid(t *testing.T) {
	noLeaks(t)
	for _, level := range levels(t) {
		t.Run(level.String(), func(t *testing.T) {
			s := startSession(t, level)
			b := s.tree.Baseline()
			unix.Kill(int(s.helper.pid), unix.SIGKILL)
			until(t, "the helper is reaped", func() bool {
				_, err := readStat(s.helper.pid)
				return gone(err)
			})
			// It is gone: a thread or process that gets its pid within
			// its clock tick must not be taken for it at cleanup.
			s.pids = slices.DeleteFunc(s.pids, func(p procKey) bool { return p == s.helper })
			var turn []procKey
			reused := false
			for try := 0; try < 20 && !reused; try++ {
				if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(int(s.helper.pid)-1)), 0); err != nil {
					t.Skipf("cannot choose the next pid: %v", err)
				}
				turn = s.turn("children")
				reused = slices.ContainsFunc(turn, func(p procKey) bool { return p.pid == s.helper.pid })
				if !reused {
					s.tree.SweepSince(b)
				}
			}
			if !reused {
				t.Skip("the helper's pid went to another process 20 times")
			}
			rep := s.tree.SweepSince(b)
			if !slices.Contains(rep.Killed, int(s.helper.pid)) {
				t.Errorf("SweepSince().Killed = %v, want it to hold %d, the helper's reused pid", rep.Killed, s.helper.pid)
			}
			for _, p := range turn {
				if alive(p) {
					t.Errorf("the turn's %d is alive after SweepSince", p.pid)
				}
			}
			if !alive(s.root) {
				t.Error("the root is gone")
			}
		})
	}
}

// BenchmarkSweep measures, at each level, the end of a turn on a tree
// whose baseline is 2 processes (the root and its helper) and whose turn
// started 3 (a grandchild, a setsid daemon and an env -i daemon, the
// root's children), with and without the sweep, in the same run:
// "without" starts the turn and ends it doing nothing (its processes are
// killed by pid outside the timing), "with" takes the Baseline, starts
// the turn and sweeps it. It reports the medians of each (with-µs,
// without-µs), their ratio and difference (extra-µs), and of Baseline and
// SweepSince alone, and of a sweep after a turn that started nothing
// (idle-sweep-µs). At the cgroup level it also measures the alternative,
// a child cgroup per turn into which the root and its helper are moved
// for the turn and out of which they are moved before it is killed,
// each turn 20 ms after the last as in a session (see turnGap):
// turncg-moves-µs (its mkdir and the four moves) and turncg-kill-µs (its
// cgroup.kill, the wait for it to empty, through pidfds as Kill waits, and
// its removal).
func BenchmarkSweep(b *testing.B) {
	lv := []Containment{Tracking}
	if lvl, _ := Probe(Cgroup, ""); lvl == Cgroup {
		lv = []Containment{Cgroup, Tracking}
	}
	for _, level := range lv {
		b.Run(level.String(), func(b *testing.B) {
			s := startSession(b, level)
			var with, without, base, sweep, idle, moves, cgkill []time.Duration
			for b.Loop() {
				begin := time.Now()
				turn := s.turn("children")
				without = append(without, time.Since(begin))
				killTurn(b, turn)

				begin = time.Now()
				bl := s.tree.Baseline()
				base = append(base, time.Since(begin))
				turn = s.turn("children")
				swept := time.Now()
				rep := s.tree.SweepSince(bl)
				sweep = append(sweep, time.Since(swept))
				with = append(with, time.Since(begin))
				if len(rep.Killed) != 3 || len(rep.Survivors) > 0 {
					b.Fatalf("SweepSince() = %+v, want 3 killed", rep)
				}
				begin = time.Now()
				if rep := s.tree.SweepSince(s.tree.Baseline()); len(rep.Killed) > 0 {
					b.Fatalf("SweepSince() with nothing new = %+v", rep)
				}
				idle = append(idle, time.Since(begin))
				if level == Cgroup {
					m, k := turnCgroup(b, s)
					moves, cgkill = append(moves, m), append(cgkill, k)
				}
			}
			if !alive(s.root) || !alive(s.helper) {
				b.Fatal("the root or its helper is gone")
			}
			wi, wo := median(with), median(without)
			b.ReportMetric(us(wi), "with-µs")
			b.ReportMetric(us(wo), "without-µs")
			b.ReportMetric(float64(wi)/float64(wo), "ratio")
			b.ReportMetric(us(wi-wo), "extra-µs")
			b.ReportMetric(us(median(base)), "baseline-µs")
			b.ReportMetric(us(median(sweep)), "sweep-µs")
			b.ReportMetric(us(median(idle)), "idle-sweep-µs")
			if level == Cgroup {
				b.ReportMetric(us(median(moves)), "turncg-moves-µs")
				b.ReportMetric(us(median(cgkill)), "turncg-kill-µs")
			}
		})
	}
}

// turnGap is the pause before each turn in a child cgroup, untimed. A
// cgroup migration takes a machine-wide lock (cgroup_threadgroup_rwsem)
// for writing, which by default waits for an RCU grace period unless
// another writer took it just before: back to back, moves cost a tenth of
// what they cost between turns that are a moment apart.
const turnGap = 20 * time.Millisecond

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// killTurn kills the turn's processes through pidfds and waits until they
// have exited (the root reaps them: they are its children).
func killTurn(b testing.TB, turn []procKey) {
	for _, p := range turn {
		if fd, err := unix.PidfdOpen(int(p.pid), 0); err == nil {
			if cur, err := readStat(p.pid); err == nil && cur.start == p.start {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
	}
	for _, p := range turn {
		for alive(p) {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// turnCgroup runs one turn of s in a child cgroup of the tree's: the root
// and its helper are moved into it, the turn starts its processes there,
// the two are moved back, and the child cgroup is killed, awaited and
// removed. It returns how long the mkdir and moves took, and the kill,
// the wait and the removal, and checks that the turn's processes are gone.
func turnCgroup(b testing.TB, s *sessionRun) (moves, kill time.Duration) {
	b.Helper()
	cg := s.tree.sys.cg
	dir := filepath.Join(cg.dir, "turn")
	move := func(to string) {
		for _, p := range []procKey{s.root, s.helper} {
			if err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(strconv.Itoa(int(p.pid))), 0); err != nil {
				b.Fatalf("moving %d to %s: %v", p.pid, to, err)
			}
		}
	}
	// Turns are seconds apart, not back to back: let the kernel's
	// cgroup locks settle as they would between turns.
	time.Sleep(turnGap)
	begin := time.Now()
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	move(dir)
	moves = time.Since(begin)
	turn := s.turn("children")
	begin = time.Now()
	move(cg.dir)
	moves += time.Since(begin)
	begin = time.Now()
	// As Kill does: pidfds to wait on, since the kernel notifies
	// cgroup.events at most once per 10 ms.
	c := &runCgroup{dir: dir}
	var held []*victim
	for _, pid := range c.pids() {
		if fd, err := unix.PidfdOpen(int(pid), 0); err == nil {
			held = append(held, &victim{pid: pid, fd: fd})
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		b.Fatal(err)
	}
	for _, v := range awaitGone(held, time.Now().Add(5*time.Second)) {
		v.close()
	}
	if !c.awaitEmpty(time.Now().Add(5 * time.Second)) {
		b.Fatal("the turn's cgroup did not empty")
	}
	if err := c.removeAll(); err != nil {
		b.Fatal(err)
	}
	kill = time.Since(begin)
	for _, p := range turn {
		if alive(p) {
			b.Fatalf("the turn's %d survived its cgroup", p.pid)
		}
	}
	return moves, kill
}
