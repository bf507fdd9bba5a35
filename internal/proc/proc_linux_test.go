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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"

	"github.com/creack/pty"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// stuck bounds every wait for a helper, so that a broken tree fails the
// test instead of hanging it. It is no timing assertion: nothing should
// come near it.
var stuck = testenv.Timeout(testenv.Hang)

// tuned returns the default tuning changed by f.
func tuned(f func(*tuning)) *tuning {
	tu := defaultTuning
	f(&tu)
	return &tu
}

// testContainment is the level of the tests that do not ask for one:
// PROC_TEST_CONTAINMENT=tracking runs them all at the fallback level.
var testContainment = func() Containment {
	switch os.Getenv("PROC_TEST_CONTAINMENT") {
	case "tracking":
		return Tracking
	case "cgroup":
		return Cgroup
	}
	return Auto
}()

// A run is a Tree under test and the processes its helpers reported.
type run struct {
	t       testing.TB
	tree    *Tree
	lines   chan string
	readerD chan struct{}
	pending []string
	pids    []procKey
	waited  bool
}

// startRun starts helper name as the root of a Tree with a, its stdout a
// pipe read by the run. Cleanup kills and reaps the tree, and checks that
// no reported process is alive.
func startRun(t testing.TB, a Attr, name string, args ...string) *run {
	t.Helper()
	markUsed(append([]string{name}, args...)...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd(name, args...)
	a.Path, a.Args, a.Env = cmd.Path, cmd.Args, cmd.Env
	if a.Containment == Auto {
		a.Containment = testContainment
	}
	if a.Marker != "" {
		a.Env = append(a.Env, a.Marker)
	}
	a.Stdout = pw
	if a.Stderr == nil {
		a.Stderr = os.Stderr
	}
	if a.Subreaper {
		subreaperUntilCleanup(t)
	}
	tree, err := Start(&a)
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("Start() error = %v", err)
	}
	r := &run{t: t, tree: tree, lines: make(chan string, 16), readerD: make(chan struct{})}
	go func() {
		defer close(r.readerD)
		defer close(r.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if !r.waited {
			r.tree.Kill()
			r.wait()
		}
		// Every writer is gone, so the reader reaches EOF.
		for range r.lines {
		}
		<-r.readerD
		assertGone(t, r.pids)
	})
	return r
}

// next returns the next line that is not a pid report, recording those.
func (r *run) next() string {
	r.t.Helper()
	if len(r.pending) > 0 {
		l := r.pending[0]
		r.pending = r.pending[1:]
		return l
	}
	for {
		l, ok := r.read()
		if !ok {
			r.t.Fatal("helper output ended")
		}
		if !r.record(l) {
			return l
		}
	}
}

func (r *run) read() (string, bool) {
	r.t.Helper()
	select {
	case l, ok := <-r.lines:
		return l, ok
	case <-time.After(stuck):
		r.t.Fatal("no output from helpers")
		return "", false
	}
}

// record records a pid report and says whether l was one.
func (r *run) record(l string) bool {
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "pid" {
		return false
	}
	pid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[2], 10, 64)
	r.pids = append(r.pids, procKey{int32(pid), start})
	return true
}

// awaitPids waits until n processes have reported and returns their pids.
func (r *run) awaitPids(n int) []int {
	r.t.Helper()
	for len(r.pids) < n {
		l, ok := r.read()
		if !ok {
			r.t.Fatalf("helper output ended after %d of %d pids", len(r.pids), n)
		}
		if !r.record(l) {
			r.pending = append(r.pending, l)
		}
	}
	var pids []int
	for _, p := range r.pids {
		pids = append(pids, int(p.pid))
	}
	return pids
}

// exited waits for the root to exit.
func (r *run) exited() {
	r.t.Helper()
	select {
	case <-r.tree.Exited():
	case <-time.After(stuck):
		r.t.Fatal("root did not exit")
	}
}

func (r *run) wait() State {
	r.t.Helper()
	r.waited = true
	st, err := r.tree.Wait()
	if err != nil {
		r.t.Errorf("Wait() error = %v", err)
	}
	return st
}

// alive reports whether the process is still running (a zombie is not).
func alive(p procKey) bool {
	cur, err := readStat(p.pid)
	return err == nil && cur.start == p.start && !cur.zombie()
}

func assertGone(t testing.TB, pids []procKey) {
	t.Helper()
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d is still alive", p.pid)
			unix.Kill(int(p.pid), unix.SIGKILL)
		}
	}
}

func assertKilled(t *testing.T, rep Report, want []int) {
	t.Helper()
	for _, pid := range want {
		if !slices.Contains(rep.Killed, pid) {
			t.Errorf("Kill().Killed = %v, want it to hold %d", rep.Killed, pid)
		}
	}
	if len(rep.Survivors) > 0 {
		t.Errorf("Kill().Survivors = %v, want none", rep.Survivors)
	}
}

func marker(t testing.TB) string {
	return fmt.Sprintf("PROC_TEST_MARKER=%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       procInfo
		err        bool
	}{
		{"plain", "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12345 1 2 3\n",
			procInfo{pid: 42, ppid: 1, pgrp: 42, sid: 42, state: 'S', start: 12345, threads: 1, rss: 2}, false},
		{"cpu times", "43 (node) R 1 43 43 0 -1 0 0 0 0 0 120 30 7 3 20 0 11 0 500 1000 2560 0\n",
			procInfo{pid: 43, ppid: 1, pgrp: 43, sid: 43, state: 'R', start: 500, threads: 11, cpu: 160, rss: 2560}, false},
		{"spaces and parens in comm", "7 (a) b (c) d) Z 3 4 5 0 -1 0 0 0 0 0 0 0 0 0 -2 -20 1 0 99 0\n",
			procInfo{pid: 7, ppid: 3, pgrp: 4, sid: 5, state: 'Z', start: 99, threads: 1}, false},
		{"main thread exited, others run", "9 (zl) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0 77 0\n",
			procInfo{pid: 9, ppid: 1, pgrp: 9, sid: 9, state: 'Z', start: 77, threads: 3}, false},
		{"truncated", "7 (x) S 1 2 3 0", procInfo{}, true},
		{"no comm", "7 x S", procInfo{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.want.pid, []byte(tt.line))
			if tt.err {
				if err == nil {
					t.Errorf("parseStat(%q) error = nil, want an error", tt.line)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseStat(%q) = %+v, %v, want %+v", tt.line, got, err, tt.want)
			}
			if wantZombie := tt.want.state == 'Z' && tt.want.threads <= 1; got.zombie() != wantZombie {
				t.Errorf("zombie() = %v, want %v: a Z process with running threads is alive", got.zombie(), wantZombie)
			}
		})
	}
}

func TestExitState(t *testing.T) {
	tests := []struct {
		args []string
		want State
	}{
		{[]string{"exit", "0"}, State{Code: 0}},
		{[]string{"exit", "3"}, State{Code: 3}},
		{[]string{"signal", "SIGTERM"}, State{Code: -1, Signal: "SIGTERM"}},
		{[]string{"signal", "SIGKILL"}, State{Code: -1, Signal: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := startRun(t, Attr{}, tt.args[0], tt.args[1:]...)
			r.exited()
			if got := r.wait(); got != tt.want {
				t.Errorf("Wait() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStartError(t *testing.T) {
	_, err := Start(&Attr{Path: "/nonexistent/agent"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start() error = %v, want one wrapping os.ErrNotExist", err)
	}
	if _, err := Start(&Attr{}); err == nil {
		t.Error("Start() with no Path: error = nil, want an error")
	}
}

func TestInterruptReachesGroup(t *testing.T) {
	r := startRun(t, Attr{}, "group")
	r.awaitPids(2)
	if err := r.tree.Signal(Interrupt); err != nil {
		t.Fatalf("Signal(Interrupt) error = %v", err)
	}
	if got, want := r.next(), "child signal: interrupt"; got != want {
		t.Errorf("root reported %q, want %q", got, want)
	}
	r.exited()
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
}

func TestKillIgnoringSignals(t *testing.T) {
	r := startRun(t, Attr{Marker: marker(t)}, "spawn", "same", "hangignore", "hangignore")
	pids := r.awaitPids(2)
	for _, s := range []Signal{Interrupt, Terminate} {
		if err := r.tree.Signal(s); err != nil {
			t.Errorf("Signal(%v) error = %v", s, err)
		}
	}
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	r.exited()
	if got, want := r.wait(), (State{Code: -1, Signal: "SIGKILL"}); got != want {
		t.Errorf("Wait() = %+v, want %+v", got, want)
	}
}

func TestKillAfterNormalExit(t *testing.T) {
	// The root exits 0 and leaves a child in its group behind.
	r := startRun(t, Attr{}, "spawn", "same", "exit", "hang")
	pids := r.awaitPids(1)
	r.exited()
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
}

// A member whose main thread has ended while another thread runs shows
// state Z in /proc but is alive: Kill must kill it, not skip it as exited.
func TestKillLiveProcessWithExitedMainThread(t *testing.T) {
	r := startRun(t, Attr{}, "spawn", "same", "exit", "zl")
	pids := r.awaitPids(1)
	r.exited()
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	r.wait()
}

func TestKillSetsidEscapee(t *testing.T) {
	for _, withMarker := range []bool{false, true} {
		t.Run(fmt.Sprintf("marker=%v", withMarker), func(t *testing.T) {
			a := Attr{}
			if withMarker {
				a.Marker = marker(t)
			}
			// The child is in a session of its own; the root still runs.
			r := startRun(t, a, "spawn", "setsid", "hang", "hang")
			pids := r.awaitPids(2)
			rep := r.tree.Kill()
			assertKilled(t, rep, pids)
			assertGone(t, r.pids)
		})
	}
}

func TestKillOrphanRecordedBySignal(t *testing.T) {
	// No marker: the root exits on SIGINT and orphans its child, which is
	// in another session, so only the snapshot Signal took finds it.
	r := startRun(t, Attr{}, "spawn", "setsid", "hangint", "hang")
	r.awaitPids(2)
	child := int(r.pids[0].pid)
	if child == r.tree.Pid() {
		child = int(r.pids[1].pid)
	}
	if err := r.tree.Signal(Interrupt); err != nil {
		t.Fatalf("Signal(Interrupt) error = %v", err)
	}
	r.exited()
	rep := r.tree.Kill()
	assertKilled(t, rep, []int{child})
	assertGone(t, r.pids)
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
}

func TestKillDoubleForkedOrphan(t *testing.T) {
	// root → intermediate (exits) → grandchild in a new session: once the
	// root has exited, only the marker links the grandchild to the tree.
	r := startRun(t, Attr{Marker: marker(t)}, "spawn", "same", "wait", "spawn", "setsid", "exit", "hang")
	pids := r.awaitPids(1)
	r.exited()
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
}

// TestSubreaper makes the test process a child subreaper for the test's
// time (see subreaperUntilCleanup): the tree's orphan re-parents to it, and
// Kill reaps it.
func TestSubreaper(t *testing.T) {
	// An unrelated child of the host, exited and not yet reaped: Kill must
	// not take its status.
	other := helperCmd("exit", "7")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, other.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}

	r := startRun(t, Attr{Marker: marker(t), Subreaper: true}, "spawn", "same", "wait", "spawn", "setsid", "exit", "hang")
	pids := r.awaitPids(1)
	r.exited()
	if p, err := readStat(int32(pids[0])); err != nil || p.ppid != int32(os.Getpid()) {
		t.Errorf("orphan %d: stat = %+v, %v; want it re-parented to the host", pids[0], p, err)
	}
	rep := r.tree.Kill()
	t.Logf("subreaper: root %d other %d report %+v", r.tree.Pid(), other.Process.Pid, rep)
	assertKilled(t, rep, pids)
	if _, err := readStat(int32(pids[0])); !errors.Is(err, unix.ENOENT) {
		t.Errorf("orphan %d after Kill: stat error = %v, want ENOENT (reaped)", pids[0], err)
	}
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
	if err := other.Wait(); other.ProcessState == nil || other.ProcessState.ExitCode() != 7 {
		t.Errorf("unrelated child: Wait() = %v, want exit status 7", err)
	}
}

func TestKillConcurrentAndRepeated(t *testing.T) {
	r := startRun(t, Attr{Marker: marker(t)}, "spawn", "setsid", "hang", "hang")
	pids := r.awaitPids(2)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		killed []int
	)
	for range 4 {
		wg.Go(func() {
			rep := r.tree.Kill()
			mu.Lock()
			killed = append(killed, rep.Killed...)
			mu.Unlock()
		})
	}
	wg.Wait()
	assertKilled(t, Report{Killed: killed}, pids)
	r.exited()
	if rep := r.tree.Kill(); len(rep.Killed) != 0 {
		t.Errorf("Kill() after the tree is gone: Killed = %v, want none", rep.Killed)
	}
	r.wait()
}

func TestKillManyTrees(t *testing.T) {
	const n = 30
	runs := make([]*run, n)
	for i := range runs {
		runs[i] = startRun(t, Attr{Marker: marker(t) + strconv.Itoa(i)}, "spawn", "setsid", "hang", "hang")
	}
	for _, r := range runs {
		r.awaitPids(2)
	}
	begin := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			rep := r.tree.Kill()
			if len(rep.Killed) != 2 || len(rep.Survivors) > 0 {
				t.Errorf("Kill() = %+v, want 2 killed, no survivors", rep)
			}
		})
	}
	wg.Wait()
	t.Logf("%d trees of 2 killed in %v", n, time.Since(begin))
	for _, r := range runs {
		assertGone(t, r.pids)
	}
}

func TestControllingTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	r := startRun(t, Attr{Stdin: tty, TTY: tty}, "tty")
	tty.Close()
	if got := r.next(); got != "tty ok" {
		t.Fatalf("helper reported %q, want %q", got, "tty ok")
	}
	r.awaitPids(1)
	if _, err := ptmx.Write([]byte{0x03}); err != nil {
		t.Fatal(err)
	}
	if got := r.next(); got != "got SIGINT" {
		t.Errorf("helper reported %q, want %q", got, "got SIGINT")
	}
	r.exited()
	if got := r.wait(); got != (State{}) {
		t.Errorf("Wait() = %+v, want exit 0", got)
	}
}

func BenchmarkScan(b *testing.B) {
	s := theScanner()
	for b.Loop() {
		if _, err := s.scan(math.MaxUint64); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanEnviron(b *testing.B) {
	s := theScanner()
	s.register("PROC_BENCH_MARKER=1")
	defer s.unregister("PROC_BENCH_MARKER=1")
	for b.Loop() {
		if _, err := s.scan(0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKill measures Kill on a tree of a root and a setsid escapee,
// both alive.
func BenchmarkKill(b *testing.B) {
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		pr, pw, _ := os.Pipe()
		cmd := helperCmd("spawn", "setsid", "hang", "hang")
		markUsed("spawn", "hang")
		tree, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: append(cmd.Env, "PROC_BENCH_MARKER=x"), Marker: "PROC_BENCH_MARKER=x", Stdout: pw})
		pw.Close()
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(pr)
		for range 2 {
			sc.Scan()
		}
		b.StartTimer()
		rep := tree.Kill()
		b.StopTimer()
		elapsed += rep.Elapsed
		if len(rep.Killed) != 2 {
			b.Errorf("Kill() = %+v, want 2 killed", rep)
		}
		tree.Wait()
		pr.Close()
		b.StartTimer()
	}
}

// TestEnvironCacheSkipsEmptyReads checks that a process whose environment
// reads as empty (as one in the middle of execve does) is not cached as
// unmarked: the next scan must read it again.
func TestEnvironCacheSkipsEmptyReads(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	s := theScanner()
	m := marker(t)
	s.register(m)
	defer s.unregister(m)
	empty := exec.Command(sleep, "100")
	empty.Env = []string{}
	full := exec.Command(sleep, "100")
	full.Env = []string{"A=1"}
	for _, c := range []*exec.Cmd{empty, full} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Wait()
		defer c.Process.Kill()
	}
	if _, err := s.scan(0); err != nil {
		t.Fatal(err)
	}
	cached := func(pid int) bool {
		p, err := readStat(int32(pid))
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock() // no scan runs while s.running is false
		defer s.mu.Unlock()
		for s.running {
			s.cond.Wait()
		}
		_, ok := s.envCache[procKey{p.pid, p.start}]
		return ok
	}
	if cached(empty.Process.Pid) {
		t.Errorf("empty environment of %d cached, want it read again", empty.Process.Pid)
	}
	if !cached(full.Process.Pid) {
		t.Errorf("environment of %d not cached, want it cached", full.Process.Pid)
	}
}

// noLeaks registers a check, run after every other cleanup of the test
// (the trees are reaped by then), that no goroutine is left behind.
// subreaperUntilCleanup makes the test process a child subreaper again
// only as long as t runs (a Start with Attr.Subreaper makes it one for
// good): the orphans of later tests, the keepers of the hosts they start
// among them, then re-parent to init, whatever order the tests run in.
func subreaperUntilCleanup(t testing.TB) {
	var was int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&was)), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if was != 0 {
		return
	}
	t.Cleanup(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
			t.Error(err)
		}
	})
}

func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// otherPid returns the reported pid that is not the root's.
func (r *run) otherPid() int {
	for _, p := range r.pids {
		if int(p.pid) != r.tree.Pid() {
			return int(p.pid)
		}
	}
	r.t.Fatal("no pid but the root's")
	return 0
}

// awaitKnown waits until the tree's tracker has recorded pid.
func (r *run) awaitKnown(pid int) {
	r.t.Helper()
	for end := time.Now().Add(stuck); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s := &r.tree.sys
		s.knownMu.Lock()
		_, ok := s.known[int32(pid)]
		s.knownMu.Unlock()
		if ok {
			return
		}
	}
	r.t.Fatalf("tracker did not record %d", pid)
}

// until polls cond until it holds, failing the test after stuck.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(stuck); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// TestKillEnvClearedOrphanAfterNormalExit: the root's child leaves the
// session and clears its environment (so it has no marker); then the root
// exits normally, without Signal. Only the tracker's snapshots, taken while
// the root ran, link the orphan to the tree; with Subreaper it is then
// also the host's child, and must be reaped.
func TestKillEnvClearedOrphanAfterNormalExit(t *testing.T) {
	noLeaks(t)
	for _, tt := range []struct {
		name      string
		marker    bool
		subreaper bool
	}{
		{"plain", false, false},
		{"marker", true, false},
		{"subreaper", false, true},
		{"marker+subreaper", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := Attr{Containment: Tracking, Subreaper: tt.subreaper}
			if tt.marker {
				a.Marker = marker(t)
			}
			r := startRun(t, a, "spawn", "setsid-envi", "hangint", "hang")
			r.awaitPids(2)
			child := r.otherPid()
			r.awaitKnown(child)
			// Not r.tree.Signal: that would take a snapshot of its own.
			unix.Kill(r.tree.Pid(), unix.SIGINT)
			r.exited()
			rep := r.tree.Kill()
			assertKilled(t, rep, []int{child})
			assertGone(t, r.pids)
			if tt.subreaper {
				if p, err := readStat(int32(child)); err == nil && p.ppid == int32(os.Getpid()) {
					t.Errorf("orphan %d is still the host's zombie: %+v", child, p)
				}
			}
			if got := r.wait(); got != (State{}) {
				t.Errorf("Wait() = %+v, want exit 0", got)
			}
		})
	}
}

// TestSubreaperReapsExitedOrphan: an orphan in its own session, its
// environment cleared, re-parented to the host, exits before the sweep.
// Its environment can no longer be read; Kill must still reap it.
func TestSubreaperReapsExitedOrphan(t *testing.T) {
	noLeaks(t)
	r := startRun(t, Attr{Containment: Tracking, Marker: marker(t), Subreaper: true}, "spawn", "setsid-envi", "hangint", "hangusr1")
	r.awaitPids(2)
	child := r.otherPid()
	r.awaitKnown(child)
	unix.Kill(r.tree.Pid(), unix.SIGINT)
	r.exited()
	until(t, "the orphan is the host's child", func() bool {
		p, err := readStat(int32(child))
		return err == nil && p.ppid == int32(os.Getpid())
	})
	unix.Kill(child, unix.SIGUSR1)
	until(t, "the orphan is a zombie", func() bool {
		p, err := readStat(int32(child))
		return err == nil && p.zombie()
	})
	r.tree.Kill()
	if p, err := readStat(int32(child)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("orphan %d after Kill: stat = %+v, %v; want ENOENT (reaped)", child, p, err)
	}
	r.wait()
}

// TestKillForkRace: a member keeps starting children that leave the
// session and clear their environment at once. Each child forked between
// a scan and the member's SIGKILL would be orphaned with no link left;
// the freeze (SIGSTOP, scan again, then SIGKILL) must catch them all.
func TestKillForkRace(t *testing.T) {
	noLeaks(t)
	for i := range 5 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			token := fmt.Sprintf("proc-test-fork-race-%d-%d-%d", os.Getpid(), i, time.Now().UnixNano())
			t.Cleanup(func() {
				for _, pid := range withArg(token) {
					t.Errorf("child %d escaped Kill", pid)
					unix.Kill(pid, unix.SIGKILL)
					var info unix.Siginfo
					unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
				}
			})
			r := startRun(t, Attr{}, "spawn", "same", "hang", "forker", token)
			if got := r.next(); got != "forking" {
				t.Fatalf("helper reported %q, want forking", got)
			}
			if rep := r.tree.Kill(); len(rep.Survivors) > 0 {
				t.Errorf("Kill().Survivors = %v, want none", rep.Survivors)
			}
			r.exited()
			r.wait()
			// Escapees are alive, in a session of their own; give any
			// still in exec time to show their argv.
			time.Sleep(50 * time.Millisecond)
		})
	}
}

// withArg returns the live processes whose argv holds arg.
func withArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), arg) {
			continue
		}
		if p, err := readStat(int32(pid)); err == nil && !p.zombie() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestKillSlowScan: scans that end after Kill's deadline, or never, must
// not keep Kill from sending SIGKILL, nor make it wait past its deadline.
//
// Each slow scan takes 0.6 of the deadline, so the second ends past it; a
// Kill that ignored its deadline would wait for that one and start more,
// taking at least 3 scans (1.8 deadlines), and a hung scan for ever. One
// that keeps its deadline returns after about one deadline and the time
// its SIGKILLs take: the bound, deadline plus one slow scan, leaves a busy
// machine most of a deadline to run the kill itself. Past its deadline
// Kill waits lastGrace for its SIGKILLs to take effect; a busy machine may
// take longer to run the killed processes' exits, so lastGrace here waits
// as long as that takes, and a survivor is a process Kill did not kill.
func TestKillSlowScan(t *testing.T) {
	noLeaks(t)
	for _, tt := range []struct {
		name string
		hung bool
	}{{"slow", false}, {"hung", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each with scans of its own
			ts := newTestScanner()
			tune := ts.tuned(func(tu *tuning) {
				tu.killTimeout = 2 * time.Second
				tu.lastGrace = stuck
			})
			r := startRun(t, Attr{Containment: Tracking, Marker: marker(t), tune: tune}, "spawn", "same", "hang", "hang")
			r.awaitPids(2)
			release := make(chan struct{})
			delay := tune.killTimeout * 6 / 10
			var inHook atomic.Int32
			hook := func() {
				inHook.Add(1)
				defer inHook.Add(-1)
				if tt.hung {
					<-release
				} else {
					time.Sleep(delay)
				}
			}
			ts.onScan.Store(&hook)
			begin := time.Now()
			rep := r.tree.Kill()
			elapsed := time.Since(begin)
			ts.onScan.Store(nil)
			close(release)
			// The slow scan Kill gave up on ends on its own: wait for it, so
			// that its goroutine is not taken for a leak.
			until(t, "the slow scans end", func() bool { return inHook.Load() == 0 })
			if max := tune.killTimeout + delay; elapsed >= max {
				t.Errorf("Kill() took %v, want less than %v (deadline %v)", elapsed, max, tune.killTimeout)
			}
			if len(rep.Survivors) > 0 {
				t.Errorf("Kill().Survivors = %v, want none", rep.Survivors)
			}
			if !slices.Contains(rep.Killed, r.tree.Pid()) {
				t.Errorf("Kill().Killed = %v, want the root %d", rep.Killed, r.tree.Pid())
			}
			for _, p := range r.pids {
				until(t, fmt.Sprintf("%d is gone", p.pid), func() bool { return !alive(p) })
			}
			r.exited()
			r.wait()
		})
	}
}

// TestKillBoundsPidfds: Kill holds at most maxPidfds pidfds at once and
// still kills every member; none is left open after it.
func TestKillBoundsPidfds(t *testing.T) {
	noLeaks(t)
	tune := tuned(func(tu *tuning) { tu.maxPidfds = 1 })
	r := startRun(t, Attr{Containment: Tracking, tune: tune}, "spawn", "same", "hang", "spawn", "setsid", "hang", "hang")
	pids := r.awaitPids(3)
	before := openPidfds(t)
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	if after := openPidfds(t); after != before {
		t.Errorf("open pidfds: %d before Kill, %d after", before, after)
	}
	r.exited()
	r.wait()
}

// openPidfds counts the test process's open pidfds.
func openPidfds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// TestKillOutOfDescriptors: with almost no descriptor left, Kill cannot
// read /proc or open pidfds. It must not take a failed read for a process
// that has exited: the root must be killed (Wait would hang otherwise),
// and any member left alive must be listed as a survivor, never reported
// killed-and-gone.
func TestKillOutOfDescriptors(t *testing.T) {
	noLeaks(t)
	tune := tuned(func(tu *tuning) { tu.killTimeout = time.Second })
	for _, mode := range []string{"same", "setsid"} {
		for free := 1; free <= 5; free++ {
			t.Run(fmt.Sprint(mode, free), func(t *testing.T) {
				r := startRun(t, Attr{tune: tune}, "spawn", mode, "hang", "hang")
				r.awaitPids(2)
				rep := withFewDescriptors(t, free, r.tree.Kill)
				// The root runs until killed: if Kill did not kill it, it
				// never exits.
				select {
				case <-r.tree.Exited():
				case <-time.After(stuck):
					t.Errorf("root did not exit after Kill (report %+v)", rep)
				}
				for _, p := range r.pids {
					if alive(p) && !slices.Contains(rep.Survivors, int(p.pid)) {
						t.Errorf("pid %d is alive after Kill but not a survivor (report %+v)", p.pid, rep)
					}
					if alive(p) {
						unix.Kill(int(p.pid), unix.SIGKILL) // the test's own helper
						until(t, fmt.Sprintf("%d is gone", p.pid), func() bool { return !alive(p) })
					}
				}
				r.exited()
				r.wait()
			})
		}
	}
}

// withFewDescriptors runs f with only free descriptors left below a
// lowered limit, and restores both before it returns.
func withFewDescriptors[T any](t *testing.T, free int, f func() T) T {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	saved := lim
	lim.Cur = min(lim.Cur, 512)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fds []int
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			break
		}
		fds = append(fds, fd)
	}
	for _, fd := range fds[len(fds)-free:] {
		unix.Close(fd)
	}
	fds = fds[:len(fds)-free]
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &saved)
	}()
	return f()
}

// TestKillStaleSnapshot: the tracker (or Signal) applies a snapshot taken
// before Kill's newest one while Kill is freezing the tree. The stale
// snapshot must not make Kill forget an orphan it has stopped: a stopped
// member that is never sent SIGKILL stays stopped for ever.
func TestKillStaleSnapshot(t *testing.T) {
	noLeaks(t)
	ts := newTestScanner()
	stale, err := ts.scan(math.MaxUint64) // taken before the tree exists
	if err != nil {
		t.Fatal(err)
	}
	r := startRun(t, Attr{Containment: Tracking, tune: ts.tuned(nil)}, "spawn", "same", "hang", "spawn", "setsid-envi", "hangint", "hang")
	pids := r.awaitPids(3)
	var mid, orphan int
	for _, p := range pids {
		if p == r.tree.Pid() {
			continue
		}
		if st, _ := readStat(int32(p)); st.sid == int32(r.tree.Pid()) {
			mid = p
		} else {
			orphan = p
		}
	}
	r.awaitKnown(orphan)
	unix.Kill(mid, unix.SIGINT) // the orphan's parent exits: no link left
	until(t, "the orphan's parent is gone", func() bool { st, err := readStat(int32(mid)); return err != nil || st.zombie() })
	var scans atomic.Int32
	hook := func() {
		if scans.Add(1) >= 2 { // from Kill's scan after the freeze on
			r.tree.sys.members(stale)
		}
	}
	ts.onScan.Store(&hook)
	rep := r.tree.Kill()
	ts.onScan.Store(nil)
	assertKilled(t, rep, []int{r.tree.Pid(), orphan})
	assertGone(t, r.pids)
	r.exited()
	r.wait()
}

// TestMembersIgnoresOlderSnapshot: members never records from, nor
// forgets by, a snapshot older than the newest one it applied.
func TestMembersIgnoresOlderSnapshot(t *testing.T) {
	noLeaks(t)
	stale, err := theScanner().scan(math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	r := startRun(t, Attr{Containment: Tracking}, "spawn", "setsid", "hang", "hang")
	r.awaitPids(2)
	child := r.otherPid()
	r.awaitKnown(child)
	fresh, err := theScanner().scan(math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	s := &r.tree.sys
	s.members(fresh)
	s.members(stale)
	s.knownMu.Lock()
	_, ok := s.known[int32(child)]
	s.knownMu.Unlock()
	if !ok {
		t.Errorf("member %d forgotten by a snapshot older than the last applied", child)
	}
}

// TestKillSparesForeignGroup: a daemon started before the run (in a
// session and group of its own) starts a worker for the run's tool, with
// the run's environment, so with its marker. The worker is a member, but
// its group is the daemon's: Kill must kill the worker alone, not the
// daemon's group.
func TestKillSparesForeignGroup(t *testing.T) {
	noLeaks(t)
	markUsed("daemon")
	file := filepath.Join(t.TempDir(), "env")
	d := helperCmd("daemon", file)
	d.Stdout = nil
	out, err := d.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var worker int
	t.Cleanup(func() {
		d.Process.Kill()
		for lines.Scan() {
		}
		d.Wait()
		if worker == 0 {
			return
		}
		// The worker's zombie re-parents to the test process if it is a
		// subreaper (TestSubreaper); reap it then.
		until(t, "the worker is reaped", func() bool {
			p, err := readStat(int32(worker))
			if err != nil || p.ppid != int32(os.Getpid()) {
				return err != nil || !p.zombie()
			}
			var ws unix.WaitStatus
			unix.Wait4(worker, &ws, unix.WNOHANG, nil)
			return false
		})
	})
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "pid ") {
		t.Fatalf("daemon did not report: %q", lines.Text())
	}
	daemon := procKey{pid: int32(d.Process.Pid)}
	if p, err := readStat(daemon.pid); err == nil {
		daemon.start = p.start
	}
	time.Sleep(20 * time.Millisecond) // the daemon is older than the root (clock ticks)
	m := marker(t)
	r := startRun(t, Attr{Containment: Tracking, Marker: m}, "hang")
	r.awaitPids(1)
	if err := os.WriteFile(file, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Process.Signal(unix.SIGUSR1) // the run's tool asks the daemon for a worker
	if !lines.Scan() {
		t.Fatal("daemon did not start a worker")
	}
	fmt.Sscanf(lines.Text(), "worker %d", &worker)
	until(t, "the worker has its environment", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", worker))
		return slices.Contains(strings.Split(string(b), "\x00"), m)
	})
	rep := r.tree.Kill()
	if !alive(daemon) {
		t.Errorf("Kill() killed the daemon %d, which is not the run's (report %+v)", daemon.pid, rep)
	}
	if p, err := readStat(int32(worker)); err == nil && !p.zombie() {
		t.Errorf("worker %d alive after Kill (report %+v)", worker, rep)
	}
	assertKilled(t, rep, []int{r.tree.Pid(), worker})
	r.exited()
	r.wait()
}

// TestKillWedgedScanner: one scan never returns (a read of /proc blocked
// on a hung mount). The first Kill waits for it until its deadline; later
// Kills must not wait again, and no Kill or Signal may leave a goroutine
// behind while the scan is stuck.
//
// A Kill that waits for the scan takes its whole killTimeout, by its own
// timer; one that does not takes wedgedWait and the time to kill two
// processes. The deadline is long beside wedgedWait so that a busy machine
// slowing the kill cannot make the second look like the first.
func TestKillWedgedScanner(t *testing.T) {
	noLeaks(t)
	// The first Kill spends its whole deadline on the scan and then gives
	// its SIGKILLs only lastGrace to take effect: a busy machine may not
	// run the killed processes' exits that soon, and Kill rightly lists
	// them as survivors. The test is about the wait for the scan, so
	// lastGrace waits as long as SIGKILL takes.
	ts := newTestScanner()
	tune := ts.tuned(func(tu *tuning) {
		tu.killTimeout = 20 * tu.wedgedWait
		tu.lastGrace = stuck
	})
	release := make(chan struct{})
	hook := func() { <-release }
	ts.onScan.Store(&hook)
	released := false
	t.Cleanup(func() {
		ts.onScan.Store(nil)
		if !released {
			close(release)
		}
	})
	var grew []int
	var orphans []procKey
	pre, base := runtime.NumGoroutine(), 0
	for i := range 4 {
		r := startRun(t, Attr{Containment: Tracking, Marker: marker(t), tune: tune}, "spawn", "same", "hang", "hang")
		r.awaitPids(2)
		begin := time.Now()
		rep := r.tree.Kill()
		elapsed := time.Since(begin)
		r.tree.Signal(Interrupt) // legal before Wait
		assertKilled(t, rep, []int{r.tree.Pid()})
		r.exited()
		r.wait()
		for range r.lines {
		}
		<-r.readerD
		for _, p := range r.pids {
			until(t, fmt.Sprintf("%d is gone", p.pid), func() bool { return !alive(p) })
		}
		for _, p := range r.pids {
			if int(p.pid) != r.tree.Pid() {
				orphans = append(orphans, p)
			}
		}
		if i > 0 && elapsed >= tune.killTimeout {
			t.Errorf("Kill %d took %v with the scanner wedged (deadline %v), want it not to wait for the scan", i, elapsed, tune.killTimeout)
		}
		if i == 0 {
			// The first run's goroutines (its tracker, its wait) end
			// after Wait returned: the base is what is left once they
			// have, with the wedged scan.
			base = goroutinesSettle(t, pre+1)
		} else {
			grew = append(grew, goroutinesSettle(t, base+1)-base)
		}
	}
	if slices.Max(grew) > 1 {
		t.Errorf("goroutines grew by %v after each Kill with the scanner wedged, want no growth", grew)
	}
	ts.onScan.Store(nil)
	close(release)
	released = true
	// Without a scan, Kill could not tell which orphans re-parented to a
	// subreaper host (TestSubreaper) are the tree's, so it did not reap
	// them: the test reaps its own.
	for _, p := range orphans {
		until(t, fmt.Sprintf("%d is reaped", p.pid), func() bool {
			cur, err := readStat(p.pid)
			if err != nil || cur.start != p.start {
				return true
			}
			if cur.ppid == int32(os.Getpid()) && cur.zombie() {
				var ws unix.WaitStatus
				unix.Wait4(int(p.pid), &ws, unix.WNOHANG, nil)
			}
			return cur.ppid != int32(os.Getpid()) && cur.zombie()
		})
	}
}

// goroutinesSettle waits until at most want goroutines run, and returns
// how many run then: goroutines that have finished their work may take a
// while to exit on a busy machine. If the count never falls to want within
// stuck, it returns the count it saw last, for the caller to report.
func goroutinesSettle(t *testing.T, want int) int {
	t.Helper()
	n := runtime.NumGoroutine()
	for end := time.Now().Add(stuck); n > want && time.Now().Before(end); n = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestKillHungEnvironRead: reading a member's environment blocks (a hung
// mount). Kill must not wait for the read beyond the scanner's envTimeout, must
// still kill the tree, and the next scans must skip the blocked read
// rather than wait for it again.
func TestKillHungEnvironRead(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	var hung, reads atomic.Int32
	hook := func(pid int32) {
		if pid == hung.Load() {
			reads.Add(1)
			<-release
		}
	}
	ts := newTestScanner()
	ts.onEnv.Store(&hook)
	t.Cleanup(func() { close(release) })
	r := startRun(t, Attr{Containment: Tracking, Marker: marker(t), tune: ts.tuned(nil)}, "spawn", "same", "hang", "spawn", "setsid", "hang", "hang")
	r.awaitPids(3)
	mid := 0
	for _, p := range r.pids {
		if st, _ := readStat(p.pid); int(p.pid) != r.tree.Pid() && st.sid == int32(r.tree.Pid()) {
			mid = int(p.pid)
		}
	}
	hung.Store(int32(mid)) // no scan has read its environment yet: the tracker does not
	begin := time.Now()
	rep := r.tree.Kill()
	elapsed := time.Since(begin)
	// A Kill that waited for the read would take its whole deadline (the
	// read ends only at cleanup); one that does not, envTimeout and the
	// kill. Whether a later scan waits again shows in the reads started.
	if max := defaultTuning.killTimeout; elapsed >= max {
		t.Errorf("Kill() took %v with an environ read blocked, want less than its deadline %v", elapsed, max)
	}
	switch n := reads.Load(); {
	case n == 0:
		t.Error("the environ read of the middle process was not blocked")
	case n > 1:
		t.Errorf("the blocked environ read was started %d times, want once (later scans skip it)", n)
	}
	assertKilled(t, rep, r.awaitPids(3))
	assertGone(t, r.pids)
	r.exited()
	r.wait()
}

// TestReapAsPID1: a host that is PID 1 (a container's entrypoint) is not a
// subreaper, yet every orphan re-parents to it: Kill must reap the tree's
// zombies there too.
func TestReapAsPID1(t *testing.T) {
	noLeaks(t)
	markUsed("init", "spawn", "exit", "hang")
	cmd := helperCmd("init")
	cmd.Stdout = nil
	cmd.SysProcAttr = &unix.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS}
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		t.Skipf("cannot start a PID namespace: %v", err)
	}
	got := strings.TrimSpace(string(out))
	if strings.HasPrefix(got, "skip") {
		t.Skip(got)
	}
	zombies, homes, _ := strings.Cut(got, "\n")
	if err != nil || zombies != "zombies 0" {
		t.Errorf("PID 1 host after Kill and Wait: %q (%v), want zombies 0", got, err)
	}
	for home := range strings.Lines(homes) {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(home), "home "); ok {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the PID 1 host's cgroup home %s is left behind (stat: %v)", dir, err)
			}
		}
	}
}

// testSnapshot builds a snapshot of procs (sorted by pid), newer than any
// applied so far.
func testSnapshot(procs ...procInfo) *snapshot {
	sn := &snapshot{seq: math.MaxUint64, procs: procs}
	for i := range procs {
		sn.kids = append(sn.kids, int32(i))
	}
	slices.SortFunc(sn.kids, func(a, b int32) int { return int(procs[a].ppid - procs[b].ppid) })
	return sn
}

// TestReapLeaderStartTime: a zombie whose session or group id is the pid
// of a known member is the tree's only if that pid still names the member
// (same starttime) or names no process; not when the pid now names
// another process, which leads the zombie's session.
func TestReapLeaderStartTime(t *testing.T) {
	const host, root, member, other = 100, 200, 300, 400
	s := &treeSys{host: host, root: root, rootStart: 10, known: map[int32]uint64{member: 20}}
	zombie := func(pid, sid int32) procInfo {
		return procInfo{pid: pid, ppid: host, pgrp: pid, sid: sid, start: 30, state: 'Z'}
	}
	for _, tt := range []struct {
		name   string
		leader *procInfo // the process now bearing the member's pid
		want   bool
	}{
		{"member alive", &procInfo{pid: member, ppid: 1, pgrp: member, sid: member, start: 20, state: 'S'}, true},
		{"member gone", nil, true},
		{"pid reused", &procInfo{pid: member, ppid: 1, pgrp: member, sid: member, start: 25, state: 'S'}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.known = map[int32]uint64{member: 20}
			s.applied = 0
			procs := []procInfo{{pid: root, ppid: host, pgrp: root, sid: root, start: 10, state: 'S'}}
			if tt.leader != nil {
				procs = append(procs, *tt.leader)
			}
			procs = append(procs, zombie(other, member))
			got := slices.Contains(s.zombies(testSnapshot(procs...)), procKey{other, 30})
			if got != tt.want {
				t.Errorf("zombie in session %d is the tree's: %v, want %v", member, got, tt.want)
			}
		})
	}
}

// TestKillPastPidfdCapSignalsThroughPidfds: past maxPidfds held open,
// Kill still never signals a member but the root by bare pid (which
// could have been reused): each signal goes through a pidfd opened,
// checked and closed for it.
func TestKillPastPidfdCapSignalsThroughPidfds(t *testing.T) {
	noLeaks(t)
	var mu sync.Mutex
	var byPid []int
	killPid := func(pid int, sig unix.Signal) error {
		mu.Lock()
		byPid = append(byPid, pid)
		mu.Unlock()
		return unix.Kill(pid, sig)
	}
	tune := tuned(func(tu *tuning) {
		tu.maxPidfds = 0
		tu.hooks = &hooks{killPid: killPid}
	})
	r := startRun(t, Attr{Containment: Tracking, tune: tune}, "spawn", "same", "hang", "spawn", "setsid", "hang", "hang")
	pids := r.awaitPids(3)
	before := openPidfds(t)
	rep := r.tree.Kill()
	assertKilled(t, rep, pids)
	assertGone(t, r.pids)
	if after := openPidfds(t); after != before {
		t.Errorf("open pidfds: %d before Kill, %d after", before, after)
	}
	mu.Lock()
	for _, pid := range byPid {
		if pid != r.tree.Pid() {
			t.Errorf("member %d signalled by pid (all by pid: %v, root %d)", pid, byPid, r.tree.Pid())
		}
	}
	mu.Unlock()
	r.exited()
	r.wait()
}

// TestTrackerSurvivesScanErrors: a scan that fails (descriptors exhausted
// for a moment) must not stop the tracker: it records the members in a
// later period.
func TestTrackerSurvivesScanErrors(t *testing.T) {
	noLeaks(t)
	var fail atomic.Bool
	var failed atomic.Int32
	fail.Store(true)
	hook := func() error {
		if fail.Load() {
			failed.Add(1)
			return unix.EMFILE
		}
		return nil
	}
	ts := newTestScanner()
	ts.scanErr.Store(&hook)
	r := startRun(t, Attr{Containment: Tracking, tune: ts.tuned(nil)}, "spawn", "setsid-envi", "hang", "hang")
	r.awaitPids(2)
	child := r.otherPid()
	until(t, "two scans fail", func() bool { return failed.Load() >= 2 })
	fail.Store(false)
	s := &r.tree.sys
	until(t, "the tracker records the child", func() bool {
		s.knownMu.Lock()
		defer s.knownMu.Unlock()
		_, ok := s.known[int32(child)]
		return ok
	})
	ts.scanErr.Store(nil)
	assertKilled(t, r.tree.Kill(), []int{child})
	r.exited()
	r.wait()
}
