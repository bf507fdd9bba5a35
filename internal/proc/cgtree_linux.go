//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/internal/ahead"
	"github.com/clinvoke/clinvoke/internal/procstat"
	"golang.org/x/sys/unix"
)

// The Tree methods at the Cgroup level: membership is the kernel's, so
// Kill is one write and a wait for the populated flag to drop.

// kill is Kill at the Cgroup level.
func (l *cgroupLevel) kill(t *Tree) Report {
	s := &t.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := time.Now()
	var rep Report
	c := l.cg
	if l.empty || !c.populated() {
		// Once the root has exited, an empty cgroup stays empty.
		l.empty = isClosed(t.exited)
		rep.Elapsed = time.Since(begin)
		return rep
	}
	pids := c.pids()
	reaps := s.reaps()
	var keys []procKey
	for _, pid := range pids {
		rep.Killed = append(rep.Killed, int(pid))
		if reaps {
			if p, err := readStat(pid); err == nil {
				keys = append(keys, procKey{p.pid, p.start})
			}
		}
	}
	if err := c.kill(); err != nil {
		t.log.Debug("proc: cgroup.kill failed", "cgroup", c.dir, "err", err)
	}
	// cgroup.kill passes over a process whose main thread has exited while
	// its other threads run: kill what is still listed, each through a
	// pidfd checked to name a member (a listed pid may exit and be reused
	// meanwhile). Then wait for those pidfds: they poll readable the moment
	// their process exits, while the kernel sends at most one
	// cgroup.events notification per 10 ms. The populated flag has the
	// last word.
	var pending []*victim
	for _, pid := range c.pids() {
		if v, _ := c.killMember(pid, nil); v != nil {
			pending = append(pending, v)
		}
	}
	for _, v := range awaitGone(pending, begin.Add(s.tune.killTimeout)) {
		v.close()
	}
	if c.awaitEmpty(begin.Add(s.tune.killTimeout)) {
		l.empty = isClosed(t.exited)
	} else {
		// Stuck in uninterruptible sleep, most likely: SIGKILL is
		// pending and takes effect when the sleep ends.
		for _, pid := range c.pids() {
			rep.Survivors = append(rep.Survivors, int(pid))
		}
		if len(rep.Survivors) == 0 {
			// cgroup.procs unreadable (descriptors exhausted): the
			// members are unknown, the tree is not empty.
			rep.Survivors = append(rep.Survivors, t.pid)
		}
	}
	// The host reaps what became its child: orphans re-parented to a
	// subreaper or PID 1 host (those killed now, and those that exited
	// before), and CLONE_PARENT siblings of the root.
	if keys = append(keys, s.zombiesIn(c)...); len(keys) > 0 {
		late := s.reap(t, nil, keys)
		s.knownMu.Lock()
		s.late = late
		s.knownMu.Unlock()
		s.reapLate.Store(len(late) > 0)
	}
	rep.Elapsed = time.Since(begin)
	t.log.Debug("proc: killed cgroup", "pid", t.pid, "cgroup", c.dir, "killed", len(rep.Killed), "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	return rep
}

// zombiesIn returns the host's zombie children that were members of c (a
// zombie keeps its cgroup in /proc/PID/cgroup): orphans re-parented to a
// subreaper or PID 1 host, and siblings of the root made with
// clone(CLONE_PARENT), whose parent is the host from the start.
func (s *treeSys) zombiesIn(c *runCgroup) []procKey {
	suffix := []byte("/" + c.base())
	var out []procKey
	for _, pid := range hostChildren(time.Now()) {
		if pid == s.root {
			continue
		}
		p, err := readStat(pid)
		if err != nil || !p.zombie() {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue
		}
		for line := range bytes.SplitSeq(cg, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("0::")) && (bytes.HasSuffix(line, suffix) || bytes.Contains(line, append(suffix, '/'))) {
				out = append(out, procKey{p.pid, p.start})
			}
		}
	}
	return out
}

// childList is the last listing of the host's children, shared by the
// Kills that need one: a listing costs as much as the host has children,
// every tree's root among them, so thousands of trees killed at once
// would each pay for all the others' roots.
var childList struct {
	mu      sync.Mutex
	cond    sync.Cond
	running bool      // a listing is being read
	at      time.Time // when the last listing started
	pids    []int32   // its children that are no tree's root; never modified
}

// hostChildren returns the host's children that are no tree's root, from
// a listing started at or after since (waiting for one when needed).
func hostChildren(since time.Time) []int32 {
	childList.mu.Lock()
	defer childList.mu.Unlock()
	if childList.cond.L == nil {
		childList.cond.L = &childList.mu
	}
	for {
		if !childList.at.IsZero() && !childList.at.Before(since) {
			return childList.pids
		}
		if !childList.running {
			break
		}
		childList.cond.Wait()
	}
	childList.running = true
	childList.mu.Unlock()
	at := time.Now()
	pids := listChildren()
	childList.mu.Lock()
	childList.running = false
	childList.at, childList.pids = at, pids
	childList.cond.Broadcast()
	return pids
}

// listChildren reads the host's children, from every thread's children
// file, leaving out the trees' roots (see roots).
func listChildren() []int32 {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var pids []int32
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for f := range bytes.FieldsSeq(b) {
			if pid, ok := procstat.Decimal(f); ok && pid <= math.MaxInt32 && !isRoot(int32(pid)) {
				pids = append(pids, int32(pid))
			}
		}
	}
	return pids
}

// roots holds the pids of the host's trees' roots that are not reaped yet.
// They are the host's children, and members of their own trees only: a
// host running thousands of trees reads none of them in zombiesIn, which
// would otherwise read the stat of every root for every Kill (measured:
// killing 10000 trees took 13 minutes on two cores, most of it there).
var roots struct {
	mu sync.RWMutex
	m  map[int32]struct{}
}

// addRoot records a tree's root; dropRoot forgets it once it is reaped.
func addRoot(pid int32) {
	roots.mu.Lock()
	defer roots.mu.Unlock()
	if roots.m == nil {
		roots.m = map[int32]struct{}{}
	}
	roots.m[pid] = struct{}{}
}

func dropRoot(pid int32) {
	roots.mu.Lock()
	defer roots.mu.Unlock()
	delete(roots.m, pid)
}

// isRoot reports whether pid is the root of one of the host's trees.
func isRoot(pid int32) bool {
	roots.mu.RLock()
	defer roots.mu.RUnlock()
	_, ok := roots.m[pid]
	return ok
}

// wait is Wait at the Cgroup level, after the root has exited.
func (l *cgroupLevel) wait(t *Tree) (State, error) {
	s := &t.sys
	s.mu.Lock()
	empty := l.empty
	s.mu.Unlock()
	if !empty {
		t.kill() // Wait without Kill, or Kill before the root exited
	}
	if s.reapLate.Load() {
		s.reapLater(t, nil)
	}
	dropRoot(s.root)
	st, cpu, err := s.reapRoot()
	<-s.done
	s.mu.Lock()
	empty = l.empty
	held := l.cg.releaseEvents(nil)
	s.mu.Unlock()
	// The last reading, before the cgroup can be reused or removed.
	stopSampling(t)
	t.finish(cpu, held)
	l.cg.home.release(l.cg, empty, t.log)
	if err != nil {
		return State{}, err
	}
	t.log.Debug("proc: reaped", "pid", t.pid, "code", st.Code, "signal", st.Signal)
	return st, nil
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// release hands back the cgroup of a reaped tree. An empty one that was
// never killed is kept for the next tree (no mkdir, no rmdir on a busy
// host's path), up to poolSize of them; the others, and all of them once
// no tree has started or ended for poolIdle, are removed. A cgroup with
// controllers is never kept: its peaks (memory.peak, pids.peak) cannot be
// reset for the next tree, nor its limits' events.
func (h *cgroupHome) release(c *runCgroup, empty bool, log *slog.Logger) {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	if !empty || c.killed || h.ctl != 0 || len(h.pool) >= poolSize {
		removeLater(c, log)
		return
	}
	h.pool = append(h.pool, c)
	h.poolLog = log
	if h.poolTimer == nil {
		h.poolTimer = time.AfterFunc(poolIdle, h.drain)
	} else {
		h.poolTimer.Reset(poolIdle)
	}
}

// reuse returns a kept empty cgroup, or nil.
func (h *cgroupHome) reuse() *runCgroup {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	if len(h.pool) == 0 {
		return nil
	}
	c := h.pool[len(h.pool)-1]
	h.pool = h.pool[:len(h.pool)-1]
	if h.poolTimer != nil {
		h.poolTimer.Reset(poolIdle)
	}
	return c
}

// drain removes the kept cgroups.
func (h *cgroupHome) drain() {
	h.poolMu.Lock()
	pool, log := h.pool, h.poolLog
	h.pool = nil
	h.poolMu.Unlock()
	for _, c := range pool {
		if err := c.removeAll(); err != nil {
			log.Warn("proc: removing a tree's cgroup", "cgroup", c.dir, "err", err)
		}
	}
}

const (
	// poolSize bounds the empty cgroups kept for reuse.
	poolSize = 16
	// poolIdle is how long kept cgroups outlive the last tree's start or
	// end.
	poolIdle = time.Second
)

// The empty cgroups of reaped trees are removed in batches, shortly after
// the first of a batch is reaped: an rmdir costs tens of microseconds of
// CPU that should not compete with the return from Wait, nor with the
// next run's start on a small machine. If the host exits first, its keeper
// removes them.
var removals struct {
	mu    sync.Mutex
	queue []*runCgroup
	v1    []*v1Run // cgroup v1 cgroups of reaped trees
	// fds are the descriptors of reaped trees' cgroup files that
	// Prepare opened (see closeLater).
	fds []int
	// prepared is how many of those trees are counted in preparedTrees:
	// they stay counted until their files are closed.
	prepared int32
	pending  bool // a flush is scheduled
	log      *slog.Logger
}

func init() { ahead.OnSettle(removeQueued) }

// removeDelay is how long a reaped tree's cgroup waits for its batch.
const removeDelay = 20 * time.Millisecond

// removeLater queues c for removal.
func removeLater(c *runCgroup, log *slog.Logger) {
	queueRemoval(func() { removals.queue = append(removals.queue, c) }, log)
}

// removeV1Later queues a reaped tree's v1 cgroups (nil: none) for
// removal.
func removeV1Later(r *v1Run, log *slog.Logger) {
	if r == nil {
		return
	}
	queueRemoval(func() { removals.v1 = append(removals.v1, r) }, log)
}

// closeLater queues the descriptors of a reaped tree's cgroup files that
// Prepare opened, prepared saying whether the tree is counted among the
// prepared ones (preparedTrees) until they are closed. Closing a cgroup
// file costs a few microseconds of the kernel's (measured: the six of a
// hybrid host took tens of microseconds on the loaded two-core machine),
// which a cancel's return need not wait for: the files hold no process.
// They are closed with the batch's removals, or at once by a settle
// (ahead.SettleAll), and before the cgroups are removed.
func closeLater(fds []int, prepared bool, log *slog.Logger) {
	if len(fds) == 0 && !prepared {
		return
	}
	queueRemoval(func() {
		removals.fds = append(removals.fds, fds...)
		if prepared {
			removals.prepared++
		}
	}, log)
}

// queueRemoval runs add with removals locked, and schedules a flush.
func queueRemoval(add func(), log *slog.Logger) {
	removals.mu.Lock()
	defer removals.mu.Unlock()
	add()
	removals.log = log
	armRemovalsLocked()
}

// armRemovals schedules a flush of the batch, unless one is scheduled.
// Prepare calls it, so that the Wait that follows finds the flush
// scheduled and queues its files alone: arming a timer sooner than the
// runtime's others wakes its poller, which took 12-13 µs of a cancel's
// return (medians of 150 cancels under chrt -f 50), the most of
// closeLater's 14-15. A CLI that takes longer than removeDelay to exit
// finds the flush gone and arms the next itself, as before: a flush does
// not re-arm itself for trees still exiting, which would wake the
// process every removeDelay for as long as one does not exit (a process
// stuck in the kernel).
func armRemovals() {
	removals.mu.Lock()
	defer removals.mu.Unlock()
	armRemovalsLocked()
}

// armRemovalsLocked is armRemovals with removals locked.
func armRemovalsLocked() {
	if !removals.pending {
		removals.pending = true
		time.AfterFunc(removeDelay, removeQueued)
	}
}

// removeQueued closes the queued descriptors, takes their trees off
// preparedTrees, and removes every queued cgroup. A flush already
// scheduled finds the queue empty.
func removeQueued() {
	removals.mu.Lock()
	queue, v1, log := removals.queue, removals.v1, removals.log
	fds, prepared := removals.fds, removals.prepared
	removals.queue, removals.v1, removals.pending = nil, nil, false
	removals.fds, removals.prepared = nil, 0
	removals.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
	preparedTrees.Add(-prepared)
	for _, c := range queue {
		if err := c.removeAll(); err != nil {
			log.Warn("proc: removing a tree's cgroup", "cgroup", c.dir, "err", err)
		}
	}
	for _, r := range v1 {
		if err := r.remove(); err != nil {
			log.Warn("proc: removing a tree's cgroup v1 cgroups", "err", err)
		}
	}
}
