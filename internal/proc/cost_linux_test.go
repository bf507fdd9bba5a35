//go:build linux

package proc

import (
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// A testScanner is a scanner of a test's own (see newScanner): the trees
// the test starts with its tuning (tuned) are scanned and tracked through
// it, and no other test's are. The test sets its hooks while it runs; a
// nil one does nothing.
type testScanner struct {
	*scanner
	onScan  atomic.Pointer[func()]       // called at the start of every scan
	scanErr atomic.Pointer[func() error] // likewise; the scan fails with its error
	onJoin  atomic.Pointer[func()]       // called when joinAfter hands out the running scan
	onEnv   atomic.Pointer[func(int32)]  // called before each environ read
}

func newTestScanner() *testScanner {
	ts := &testScanner{}
	ts.scanner = newScanner(scanHooks{
		scan: func() error {
			if h := ts.onScan.Load(); h != nil {
				(*h)()
			}
			if h := ts.scanErr.Load(); h != nil {
				return (*h)()
			}
			return nil
		},
		joined: func() {
			if h := ts.onJoin.Load(); h != nil {
				(*h)()
			}
		},
		environ: func(pid int32) {
			if h := ts.onEnv.Load(); h != nil {
				(*h)(pid)
			}
		},
	})
	return ts
}

// tuned returns the default tuning changed by f (if not nil), for trees
// scanned and tracked through ts.
func (ts *testScanner) tuned(f func(*tuning)) *tuning {
	return tuned(func(tu *tuning) {
		tu.hooks = &hooks{scanner: ts.scanner}
		if f != nil {
			f(tu)
		}
	})
}

// tracked returns how many trees ts's tracker records.
func (ts *testScanner) tracked() int {
	ts.tracker.mu.Lock()
	defer ts.tracker.mu.Unlock()
	return len(ts.tracker.trees)
}

// countScans counts the scans of /proc by ts that start until the test
// ends, from a moment when no scan is running or asked for (see
// awaitNoScan). Every scan counted is one the test caused, or one of ts's
// tracker while a tree is tracked: the tracker scans every period while a
// tracked root runs, never less often than defaultTuning.trackEvery
// whatever the trees' own periods (see track).
func countScans(t *testing.T, ts *testScanner) *atomic.Int64 {
	t.Helper()
	awaitNoScan(t, ts)
	var n atomic.Int64
	hook := func() { n.Add(1) }
	ts.onScan.Store(&hook)
	return &n
}

// awaitNoScan waits until no scan of ts is running or asked for, on the
// scanner's broadcast at the end of each scan: a scan whose goroutine has
// started but not yet reached its hook is then none left over. Only a
// request made later can start another.
func awaitNoScan(t *testing.T, ts *testScanner) {
	t.Helper()
	s := ts.scanner
	idle := make(chan struct{})
	go func() {
		s.mu.Lock()
		for s.running || s.next.asked {
			s.cond.Wait()
		}
		s.mu.Unlock()
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(stuck):
		t.Fatal("a scan of /proc is still running or asked for")
	}
}

// scanAsked reports whether someone has asked ts for a scan that has not
// started yet: while a scan runs, every request joins the next batch.
func (ts *testScanner) scanAsked() bool {
	s := ts.scanner
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next.asked
}

// holdNextScan holds the next scan of ts to start at its start (in its
// hook, before it reads anything) and returns once it is held; release
// lets it go on (the test's end does too). While it is held no other scan
// of ts can start: the scanner runs one at a time, and a request made
// meanwhile joins the next batch (scanAsked) or is handed the held scan
// (onJoin). Whoever asked for the held scan waits for it.
func holdNextScan(t *testing.T, ts *testScanner) (release func()) {
	t.Helper()
	awaitNoScan(t, ts)
	held, rel := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	hook := func() {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-rel
		}
	}
	ts.onScan.Store(&hook)
	release = func() {
		if ts.onScan.CompareAndSwap(&hook, nil) {
			close(rel)
		}
	}
	t.Cleanup(release)
	select {
	case <-held:
	case <-time.After(stuck):
		t.Fatal("no scan of /proc started")
	}
	return release
}

// TestCgroupRunScansNothing: at the cgroup level the kernel keeps the
// membership, so nothing a run does lists or reads all of /proc: not
// Start, Snapshot, Signal, a Kill that finds live members (a setsid
// escapee among them), nor Wait. Its cost is then independent of what else
// the machine runs.
func TestCgroupRunScansNothing(t *testing.T) {
	noLeaks(t)
	if lvl, err := Probe(Cgroup, ""); lvl != Cgroup {
		t.Skipf("cgroup level not available here: %v", err)
	}
	ts := newTestScanner()
	scans := countScans(t, ts)
	r := startRun(t, Attr{Containment: Cgroup, Marker: marker(t), tune: ts.tuned(nil)}, "spawn", "setsid", "hangint", "hang")
	if got := r.tree.Containment(); got != Cgroup {
		t.Fatalf("Containment() = %v, want cgroup", got)
	}
	// The tracker scans while some tree is tracked: a cgroup-level tree
	// must not be.
	if n := ts.tracked(); n != 0 {
		t.Fatalf("a cgroup-level tree is tracked (%d trees): its tracker scans /proc", n)
	}
	pids := r.awaitPids(2)
	r.tree.Snapshot()
	if err := r.tree.Signal(Interrupt); err != nil {
		t.Fatalf("Signal(Interrupt) error = %v", err)
	}
	r.exited()
	rep := r.tree.Kill()
	assertKilled(t, rep, []int{r.otherPid()})
	assertGone(t, r.pids)
	r.wait()
	if n := scans.Load(); n != 0 {
		t.Errorf("a cgroup-level run of %v scanned /proc %d times, want none", pids, n)
	}
}

// TestSignalRecordsWithoutScan: at the tracking level Signal records the
// tree's members by walking their parent links, not by a scan of every
// process: an orphan the signal makes (in a session of its own, without the
// marker) is still found by Kill, and neither Signal nor Snapshot scanned.
func TestSignalRecordsWithoutScan(t *testing.T) {
	noLeaks(t)
	// The tracker scans /proc every period while the root runs, whatever
	// the tree's period (see countScans), so counting the scans that start
	// while Snapshot and Signal run would count its too. Instead the test
	// holds the tracker's next scan at its start: the tracker waits for
	// it, so it asks for no other, and no scan can start until it ends.
	// Whatever asks for a scan meanwhile is Snapshot or Signal.
	ts := newTestScanner()
	tune := ts.tuned(func(tu *tuning) { tu.trackEvery = 20 * time.Millisecond })
	r := startRun(t, Attr{Containment: Tracking, tune: tune}, "spawn", "setsid", "hangint", "hang")
	r.awaitPids(2)
	child := r.otherPid()
	release := holdNextScan(t, ts) // nothing but the tracker asks for a scan here
	if ts.scanAsked() {
		t.Fatal("a scan was asked for while the tracker's is held: the tracker is not alone in scanning")
	}
	var handed atomic.Int64 // requests served by the held scan
	jh := func() { handed.Add(1) }
	ts.onJoin.Store(&jh)
	// The tracker may have recorded the child already: forget it, so that
	// only Snapshot or Signal can record it (the tracker waits).
	s := &r.tree.sys
	s.knownMu.Lock()
	delete(s.known, int32(child))
	s.knownMu.Unlock()
	r.tree.Snapshot()
	if err := r.tree.Signal(Interrupt); err != nil {
		t.Fatalf("Signal(Interrupt) error = %v", err)
	}
	if ts.scanAsked() || handed.Load() != 0 {
		t.Errorf("Snapshot and Signal asked for a scan of /proc, want none")
	}
	s.knownMu.Lock()
	_, ok := s.known[int32(child)]
	s.knownMu.Unlock()
	if !ok {
		t.Errorf("Signal did not record the child %d", child)
	}
	release()
	r.exited()
	assertKilled(t, r.tree.Kill(), []int{child})
	assertGone(t, r.pids)
	r.wait()
}

// TestTrackerSharesScans: the trees at the tracking level are recorded
// from one scan per period, whatever their number, not one scan per tree:
// each scan lists all of /proc.
func TestTrackerSharesScans(t *testing.T) {
	noLeaks(t)
	const trees, every = 6, 50 * time.Millisecond
	ts := newTestScanner()
	tune := ts.tuned(func(tu *tuning) { tu.trackEvery = every })
	var runs []*run
	for range trees {
		r := startRun(t, Attr{Containment: Tracking, tune: tune}, "spawn", "setsid-envi", "hang", "hang")
		r.awaitPids(2)
		runs = append(runs, r)
	}
	scans := countScans(t, ts)
	begin := time.Now()
	for _, r := range runs {
		r.awaitKnown(r.otherPid()) // recorded by the tracker
	}
	until(t, "ten scans", func() bool { return scans.Load() >= 10 })
	n, periods := scans.Load(), int64(time.Since(begin)/every)
	if n > periods+2 {
		t.Errorf("%d trees tracked for %d periods took %d scans, want at most one per period", trees, periods, n)
	}
	t.Logf("%d scans in %d periods", n, periods)
	for _, r := range runs {
		assertKilled(t, r.tree.Kill(), []int{r.tree.Pid(), r.otherPid()})
		r.wait()
	}
}

// TestKillAfterTreeGoneScansNothing: once a Kill at the tracking level has
// found the tree gone after the root exited, nothing can join the tree any
// more: a second Kill (the ladder's, then the sweep after the exit) returns
// at once, without listing /proc.
func TestKillAfterTreeGoneScansNothing(t *testing.T) {
	noLeaks(t)
	// No marker: the scans read no environment, so none is unsure (on a
	// busy machine some other process may be in the middle of execve).
	ts := newTestScanner()
	r := startRun(t, Attr{Containment: Tracking, tune: ts.tuned(nil)}, "spawn", "same", "hang", "hang")
	pids := r.awaitPids(2)
	assertKilled(t, r.tree.Kill(), pids)
	r.exited()
	if rep := r.tree.Kill(); len(rep.Killed) != 0 || len(rep.Survivors) != 0 {
		t.Fatalf("Kill() after the tree was killed = %+v, want nothing", rep)
	}
	scans := countScans(t, ts)
	if rep := r.tree.Kill(); len(rep.Killed) != 0 || len(rep.Survivors) != 0 {
		t.Errorf("third Kill() = %+v, want nothing", rep)
	}
	if n := scans.Load(); n != 0 {
		t.Errorf("Kill() of a tree known gone scanned /proc %d times, want none", n)
	}
	assertGone(t, r.pids)
	r.wait()
}

// TestScansCoalesce: requests for a scan made while one runs are all
// served by the next scan, one for all of them, however many they are.
func TestScansCoalesce(t *testing.T) {
	t.Parallel() // its scans are its own
	const callers = 50
	var scans atomic.Int64
	running, release := make(chan struct{}), make(chan struct{})
	hook := func() {
		if scans.Add(1) == 1 {
			close(running)
			<-release
		}
	}
	s := newTestScanner()
	s.onScan.Store(&hook)
	first, _ := s.join(math.MaxUint64, 0, defaultTuning.killTimeout)
	<-running
	var next []*scanBatch
	for range callers {
		b, _ := s.join(math.MaxUint64, 0, defaultTuning.killTimeout)
		next = append(next, b)
	}
	close(release)
	<-first.done
	for _, b := range next {
		<-b.done
		if b != next[0] || b.err != nil {
			t.Fatalf("callers got different batches, or an error: %v", b.err)
		}
	}
	if n := scans.Load(); n != 2 {
		t.Errorf("1 + %d requests took %d scans, want 2", callers, n)
	}
}

// TestKillAfterExitJoinsRunningScan: a Kill called after the root exited
// needs a scan that started after the exit, not after the call: one
// already running serves it, rather than a scan of its own after that one.
func TestKillAfterExitJoinsRunningScan(t *testing.T) {
	noLeaks(t)
	ts := newTestScanner()
	tune := ts.tuned(func(tu *tuning) { tu.trackEvery = time.Hour }) // no tracker scan
	r := startRun(t, Attr{Containment: Tracking, tune: tune}, "exit", "0")
	r.exited()
	var scans atomic.Int64
	running, release := make(chan struct{}), make(chan struct{})
	hook := func() {
		if scans.Add(1) == 1 {
			close(running)
			<-release
		}
	}
	ts.onScan.Store(&hook)
	joined := make(chan struct{})
	jh := func() { close(joined) }
	ts.onJoin.Store(&jh)
	// A scan started after the exit (another Kill's, say) is running.
	other, _ := ts.join(math.MaxUint64, 0, defaultTuning.killTimeout)
	<-running
	done := make(chan Report)
	go func() { done <- r.tree.Kill() }()
	select {
	case <-joined:
	case rep := <-done:
		close(release)
		t.Fatalf("Kill() = %+v returned before the running scan ended", rep)
	case <-time.After(stuck):
		close(release)
		<-done
		t.Fatal("Kill() did not wait on the running scan")
	}
	close(release)
	<-other.done
	if rep := <-done; len(rep.Killed) != 0 || len(rep.Survivors) != 0 {
		t.Errorf("Kill() = %+v, want nothing", rep)
	}
	if n := scans.Load(); n != 1 {
		t.Errorf("Kill() after the exit took %d scans with one already running, want that one only", n)
	}
	r.wait()
}
