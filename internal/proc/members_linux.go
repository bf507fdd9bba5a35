//go:build linux

package proc

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

// The tracker records the members of every Tree at the tracking level into
// its known set every trackEvery while its root runs, by parent links only
// (no environments; only processes started after the root are read: a scan
// that finds nothing new costs a few getdents calls).
//
// A descendant that leaves the session with setsid and clears its
// environment (env -i, or a CLI's tool environment policy) can be found
// only by its parent links, which vanish when its parent exits; without
// these snapshots Kill, after a normal exit, would never have seen it. A
// process that does all that and outlives its parent within one period is
// still missed unless the host is its subreaper (see Kill).
//
// One goroutine tracks every Tree of the host, from one scan per period
// shared by all of them: a scan lists all of /proc, so a scan per Tree
// would make each run's cost grow with everything else the machine runs,
// times the runs. It runs while some Tree is tracked. A scan that fails
// (descriptors exhausted for a moment, say) is logged and the next period
// tries again: stopping would leave every later descendant unrecorded for
// the rest of the run.
//
// The tracker is the scanner's (scanner.tracker): the host's tracks the
// host's Trees, and a test's scanner the trees of that test.
type tracker struct {
	mu    sync.Mutex
	trees map[*treeSys]trackedTree
	quit  chan struct{} // closed when trees becomes empty
}

type trackedTree struct {
	exited <-chan struct{}
	log    *slog.Logger
}

// startTracking adds s to the trees its scanner's tracker records,
// starting the tracker if it is not running.
// It first reads the user namespace the run was started in (see
// trackingLevel.userns).
func (s *treeSys) startTracking(exited <-chan struct{}, log *slog.Logger) {
	// Opened first: the root, not yet reaped, holds its namespace (and
	// the ones above it) until then; the file holds them after.
	pin, err := os.Open(userNSPath(s.root))
	if s.userns = runUserNS(s.root); !s.userns.zero() && err == nil {
		s.usernsPin = pin
	} else if err == nil {
		pin.Close()
	}
	sc := s.scanner()
	tracker := &sc.tracker
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if tracker.trees == nil {
		tracker.trees = map[*treeSys]trackedTree{}
	}
	tracker.trees[s] = trackedTree{exited, log}
	if tracker.quit == nil {
		tracker.quit = make(chan struct{})
		go sc.track(tracker.quit)
	}
}

// stopTracking removes s from the tracked trees: once it returns, the
// tracker no longer records into s.
func (s *treeSys) stopTracking() {
	tracker := &s.scanner().tracker
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if _, ok := tracker.trees[s]; !ok {
		return
	}
	delete(tracker.trees, s)
	if len(tracker.trees) == 0 {
		close(tracker.quit)
		tracker.quit = nil
	}
}

// track is the loop of sc's tracker; it returns when quit is closed. Its
// periods start at multiples of trackEvery (the shortest of the trees'),
// whoever started it.
func (sc *scanner) track(quit chan struct{}) {
	tracker := &sc.tracker
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		tracker.mu.Lock()
		every, tune := defaultTuning.trackEvery, defaultTuning
		for s := range tracker.trees {
			if s.tune.trackEvery > 0 && s.tune.trackEvery < every {
				every, tune = s.tune.trackEvery, s.tune
			}
		}
		tracker.mu.Unlock()
		now := time.Now()
		timer.Reset(now.Truncate(every).Add(every).Sub(now))
		select {
		case <-quit:
			return
		case <-timer.C:
		}
		// Every running tree's members started at or after its root:
		// the scan must read the stat of every process started since
		// the oldest root.
		fresh, any := uint64(math.MaxUint64), false
		tracker.mu.Lock()
		for s, tt := range tracker.trees {
			if !isClosed(tt.exited) {
				fresh, any = min(fresh, s.rootStart), true
			}
		}
		tracker.mu.Unlock()
		if !any {
			continue
		}
		sn, err, ok := sc.scanUntil(&tune, math.MaxUint64, fresh, quit, nil)
		if !ok {
			continue // quit, or the scanner is wedged: try next period
		}
		tracker.mu.Lock()
		for s, tt := range tracker.trees {
			switch {
			case isClosed(tt.exited) || s.rootStart < fresh:
				// Exited, or started after the scan was asked for
				// with a root older than its fresh bound (a clock
				// step): next period.
			case err != nil:
				tt.log.Debug("proc: tracker scan failed", "pid", s.root, "err", err)
			default:
				s.members(sn)
			}
		}
		tracker.mu.Unlock()
	}
}

// scanUntil waits for a scan until stop is closed or expired fires
// (either may be nil); ok is false when it stopped waiting. When the
// shared scanner is wedged (its running scan has outlasted a whole Kill: a
// read of /proc blocked in the kernel), it waits wedgedWait at most, so
// that each Kill does not wait its full deadline again. The scanner is
// shared, so a caller with a deadline must not wait on it for ever;
// waiting costs no goroutine (see scanner.join), so callers that give up
// leave nothing behind.
func (sc *scanner) scanUntil(tune *tuning, minStart, freshFrom uint64, stop <-chan struct{}, expired <-chan time.Time) (sn *snapshot, err error, ok bool) {
	return sc.scanAfter(tune, time.Time{}, minStart, freshFrom, stop, expired)
}

// scanAfter is scanUntil for a caller that needs only a scan started at or
// after after (see scanner.joinAfter): one already running may serve it.
func (sc *scanner) scanAfter(tune *tuning, after time.Time, minStart, freshFrom uint64, stop <-chan struct{}, expired <-chan time.Time) (sn *snapshot, err error, ok bool) {
	b, wedged := sc.joinAfter(after, minStart, freshFrom, tune.killTimeout)
	var short <-chan time.Time
	if wedged {
		timer := time.NewTimer(tune.wedgedWait)
		defer timer.Stop()
		short = timer.C
	}
	select {
	case <-b.done:
		return b.snap, b.err, true
	case <-stop:
	case <-expired:
	case <-short:
	}
	return nil, nil, false
}

// members does nothing at the Cgroup level: the cgroup keeps every member.
func (*cgroupLevel) members(*Tree) {}

func (t *Tree) signal(s Signal) error {
	t.snapshot()
	t.log.Debug("proc: signal group", "pgid", t.pid, "signal", s.String())
	return signalGroup(t.pid, s)
}

// members records the tree's members by their parent links. A signal may
// make a CLI exit and orphan tools it started in other sessions
// (docs/cli-facts.md, "Cancellation behaviour"), some of which may have cleared
// their environment of the marker. The parent links, recorded while they
// exist, let Kill find those orphans later. The tracker records them too,
// but only every trackEvery.
//
// It walks the tree's parent links from the root and the known members
// (see walk), which reads the tree's processes only; where the kernel
// cannot list a process's children, it waits for a scan instead.
func (*trackingLevel) members(t *Tree) {
	sn, err := t.sys.walk()
	if err == nil {
		t.sys.record(sn)
		return
	}
	if !errors.Is(err, errNoChildren) {
		t.log.Debug("proc: walk failed; scanning", "pid", t.pid, "err", err)
	}
	timer := time.NewTimer(t.sys.tune.signalScanTimeout)
	if sn, err, ok := t.sys.scanner().scanUntil(&t.sys.tune, math.MaxUint64, t.sys.rootStart, nil, timer.C); ok && err == nil {
		t.sys.members(sn)
	}
	timer.Stop()
}

// members returns the live processes of the tree in sn and records them as
// known. Members are: the root, its process group and session, the
// processes carrying the marker, those in the run's user namespace or one
// nested in it (where it has one of its own: trackingLevel.userns), those
// seen before (known, same starttime), the processes in a session or group whose id is the pid of a
// known member still present in sn or of any member found in sn, alive or
// a zombie (that pid cannot have been reused, so the session or group is
// the member's), and every descendant of any of these. A snapshot older
// than the newest one applied is not applied: it neither records nor
// forgets.
//
// A process re-parented to the host (a subreaper) is a member only by one
// of these rules: its ppid says nothing, since other runs' orphans
// re-parent to the host too. So one that was never seen while its parent
// links existed, left the session and cleared its environment is not
// found, unless the run's user namespace finds it.
//
// Only processes started at or after the root count: every process of the
// tree did, and the snapshot may or may not hold older ones (see scanner),
// so ignoring them all keeps the answer independent of that.
func (s *treeSys) members(sn *snapshot) []procInfo {
	alive, _ := s.memberSet(sn)
	return alive
}

// memberSet is members, and also returns the pids of every member in sn,
// zombies included.
func (s *treeSys) memberSet(sn *snapshot) ([]procInfo, map[int32]bool) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	// The tracker or Signal may apply a snapshot after Kill applied a
	// newer one; an older snapshot must neither record nor forget.
	apply := sn.seq >= s.applied
	if apply {
		s.applied = sn.seq
	}
	in := map[int32]bool{}
	var queue []int32
	add := func(i int) {
		p := &sn.procs[i]
		if p.pid == s.host || p.pid <= 1 || in[p.pid] || p.start < s.rootStart {
			return
		}
		in[p.pid] = true
		queue = append(queue, int32(i))
	}
	// knownLeader reports whether id is the pid of a known member that is
	// still in sn (alive or a zombie).
	knownLeader := func(id int32) bool {
		start, ok := s.known[id]
		if !ok {
			return false
		}
		i, ok := sn.find(id)
		return ok && sn.procs[i].start == start
	}
	for i := range sn.procs {
		p := &sn.procs[i]
		if p.start < s.rootStart {
			continue
		}
		if p.pid == s.root || p.pgrp == s.root || p.sid == s.root || knownLeader(p.sid) || knownLeader(p.pgrp) {
			add(i)
		}
	}
	if s.marker != "" {
		for _, pid := range sn.marked[s.marker] {
			if i, ok := sn.find(pid); ok {
				add(i)
			}
		}
	}
	if !s.userns.zero() {
		// The run's user namespace: a mark no member can clear. One
		// stat for each process started since the root that no other
		// rule found; a zombie has no namespace left to read.
		for i := range sn.procs {
			if p := &sn.procs[i]; p.start >= s.rootStart && !in[p.pid] && !p.kthread && !p.zombie() && inUserNS(p.pid, s.userns) {
				add(i)
			}
		}
	}
	for pid, start := range s.known {
		if i, ok := sn.find(pid); ok && sn.procs[i].start == start {
			add(i)
		}
	}
	var alive []procInfo
	for k := 0; ; {
		for ; k < len(queue); k++ {
			p := sn.procs[queue[k]]
			for _, c := range sn.children(p.pid) {
				add(int(c))
			}
			if !p.zombie() {
				alive = append(alive, p)
				if apply {
					s.known[p.pid] = p.start
				}
			}
		}
		// A session or group whose id is the pid of a member in sn
		// (alive or a zombie: the id cannot have been reused) is the
		// tree's: this finds a double-forked child whose intermediate
		// parent is a zombie under a stopped parent, say.
		for i := range sn.procs {
			if p := &sn.procs[i]; !in[p.pid] && (in[p.sid] || in[p.pgrp]) {
				add(i)
			}
		}
		if k == len(queue) {
			break
		}
	}
	if apply {
		s.forget(sn)
		if s.acct != nil && s.acct.plan.sampled() {
			// Every look at the members is also a sample of their use
			// (see usage_sampled_linux.go); zombies count for their CPU
			// time, which their parent has not taken yet.
			procs := slices.Clone(alive)
			for pid := range in {
				if i, ok := sn.find(pid); ok && sn.procs[i].zombie() {
					procs = append(procs, sn.procs[i])
				}
			}
			s.acct.sample(procs)
		}
	}
	return alive, in
}

// forget drops from known the processes that are gone from sn, unless a
// process in sn still has their pid as its session or group id (reap
// needs those). Without it a long run that starts many short tools would
// grow known without bound. s.knownMu is held.
func (s *treeSys) forget(sn *snapshot) {
	var ids map[int32]bool
	for pid, start := range s.known {
		if i, ok := sn.find(pid); ok && sn.procs[i].start == start {
			continue
		}
		if ids == nil {
			ids = map[int32]bool{}
			for i := range sn.procs {
				if p := &sn.procs[i]; p.start >= s.rootStart {
					ids[p.sid], ids[p.pgrp] = true, true
				}
			}
		}
		if !ids[pid] {
			delete(s.known, pid)
		}
	}
}
