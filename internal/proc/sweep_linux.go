//go:build linux

package proc

import (
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Baseline and SweepSince on Linux. A session keeps one CLI running across
// turns; a cancelled turn's tools must go while the CLI and the helpers it
// keeps stay. The members present when the CLI was idle are the baseline;
// what is new at the turn's end is killed, each process alone. Why not a
// child cgroup per turn is explained on SweepSince; BenchmarkSweep
// measures both.

// userHZ is the unit of start times in /proc/PID/stat: clock ticks per
// second. The kernel reports them in USER_HZ, which is 100 on every
// architecture Go supports.
const userHZ = 100

// bootTicks returns the current time on the clock of the start times in
// /proc/PID/stat (CLOCK_BOOTTIME in clock ticks, as the kernel computes
// them), or 0 if it cannot be read.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano()) / (1e9 / userHZ)
}

// pidfsMagic is PID_FS_MAGIC, the file system of pidfds since Linux 6.9,
// where the inode number of a pidfd identifies its process for the whole
// boot: every pidfd of a process has it, and no other process ever gets
// it (unlike a pid, or a start time in 10 ms ticks).
const pidfsMagic = 0x50494446

// onPidfs reports whether pidfds live on pidfs here.
var onPidfs = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var fs unix.Statfs_t
	return unix.Fstatfs(fd, &fs) == nil && fs.Type == pidfsMagic
})

// pidfdID returns the inode number of the pidfd fd on pidfs, or 0 where
// pidfds are not on pidfs (or fstat fails).
func pidfdID(fd int) uint64 {
	if !onPidfs() {
		return 0
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	return st.Ino
}

// identify returns the member for the live process pid that started at
// start (0 for start: any), with its pidfd's id when it has one; ok is
// false when pid names no such process.
func identify(pid int32, start uint64) (m member, ok bool) {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		if !gone(err) && start != 0 {
			return member{pid: int(pid), start: start}, true // no id: start time only
		}
		return member{}, false
	}
	defer unix.Close(fd)
	// Read after the pidfd is open: if pid is still this process, the
	// pidfd is its.
	p, err := readStat(pid)
	if err != nil || p.zombie() || (start != 0 && p.start != start) {
		return member{}, false
	}
	return member{pid: int(pid), start: p.start, id: pidfdID(fd)}, true
}

// spared reports whether b spares the live process pid that started at
// start: by pid and start time (see Baseline.spares), and, where b's member
// has an id, by the id of fd, a pidfd for the process (-1: one is opened),
// so that a process that reused a member's pid within the same clock tick
// is not spared. Where the id cannot be read, pid and start time decide.
func spared(b *Baseline, pid int32, start uint64, fd int) bool {
	m, ok := b.find(int(pid), start)
	if !ok {
		return start < b.since
	}
	if m.id == 0 {
		return true
	}
	if fd < 0 {
		var err error
		if fd, err = unix.PidfdOpen(int(pid), 0); err != nil {
			return true
		}
		defer unix.Close(fd)
	}
	id := pidfdID(fd)
	return id == 0 || id == m.id
}

// baseline is Baseline at the Cgroup level: the cgroup's processes.
func (l *cgroupLevel) baseline(_ *Tree, b *Baseline) {
	for _, pid := range l.cg.pids() {
		if m, ok := identify(pid, 0); ok {
			b.members = append(b.members, m)
		}
	}
}

// baseline is Baseline at the Tracking level: the members a scan finds,
// or, without a scan, those known after a walk.
func (l *trackingLevel) baseline(t *Tree, b *Baseline) {
	s := &t.sys
	minStart := uint64(math.MaxUint64)
	if l.marker != "" {
		minStart = s.rootStart
	}
	timer := time.NewTimer(s.tune.signalScanTimeout)
	sn, err, ok := s.scanner().scanUntil(&s.tune, minStart, s.rootStart, nil, timer.C)
	timer.Stop()
	if ok && err == nil {
		for _, p := range s.members(sn) {
			if m, ok := identify(p.pid, p.start); ok {
				b.members = append(b.members, m)
			}
		}
		return
	}
	t.log.Debug("proc: no scan for a baseline; walking", "pid", t.pid, "err", err, "timeout", !ok)
	if sn, err := s.walk(); err == nil {
		s.record(sn)
	}
	s.knownMu.Lock()
	keys := []procKey{{s.root, s.rootStart}}
	for pid, start := range s.known {
		if pid != s.root {
			keys = append(keys, procKey{pid, start})
		}
	}
	s.knownMu.Unlock()
	for _, k := range keys {
		if m, ok := identify(k.pid, k.start); ok {
			b.members = append(b.members, m)
		}
	}
}

// sweep is SweepSince at the Cgroup level.
func (l *cgroupLevel) sweep(t *Tree, b *Baseline) Report {
	s := &t.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := time.Now()
	deadline := begin.Add(s.tune.killTimeout)
	c := l.cg
	var rep Report
	if l.empty || !c.populated() {
		rep.Elapsed = time.Since(begin)
		return rep
	}
	var (
		pending []*victim
		killed  []procKey
		seen    = map[procKey]bool{}
		unsure  []int
	)
	defer func() {
		for _, v := range pending {
			v.close()
		}
	}()
	for {
		fresh := false
		for _, pid := range c.pids() {
			if pid == s.root {
				continue
			}
			v, err := c.killMember(pid, b)
			if err != nil {
				t.log.Debug("proc: cannot sweep member", "pid", t.pid, "member", pid, "err", err)
				if !slices.Contains(unsure, int(pid)) {
					unsure = append(unsure, int(pid))
				}
				continue
			}
			if v == nil {
				continue
			}
			key := procKey{v.pid, v.start}
			if seen[key] {
				v.close() // killed before, not gone yet
				continue
			}
			seen[key] = true
			fresh = true
			rep.Killed = append(rep.Killed, int(pid))
			killed = append(killed, key)
			pending = append(pending, v)
		}
		if !fresh {
			break
		}
		// Wait for the killed: a process forked by one of them before
		// its SIGKILL is listed by the next round.
		if pending = awaitGone(pending, deadline); len(pending) > 0 {
			break // out of time
		}
		if !time.Now().Before(deadline) {
			// Out of time with every process killed so far gone: what
			// is listed now and not spared is left.
			for _, pid := range c.pids() {
				if p, err := readStat(pid); pid != s.root && err == nil && !p.zombie() && !spared(b, pid, p.start, -1) {
					unsure = append(unsure, int(pid))
				}
			}
			break
		}
	}
	rep.survive(pending)
	for _, pid := range unsure {
		if !slices.Contains(rep.Survivors, pid) {
			rep.Survivors = append(rep.Survivors, pid)
		}
	}
	if len(killed) > 0 && s.reaps() {
		s.addLate(s.reap(t, nil, killed))
	}
	rep.Elapsed = time.Since(begin)
	t.log.Debug("proc: swept cgroup", "pid", t.pid, "cgroup", c.dir, "killed", rep.Killed, "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	return rep
}

// addLate adds zombies a sweep could not reap yet to those Wait reaps.
func (s *treeSys) addLate(late []procKey) {
	if len(late) == 0 {
		return
	}
	s.knownMu.Lock()
	for _, z := range late {
		if !slices.Contains(s.late, z) {
			s.late = append(s.late, z)
		}
	}
	s.knownMu.Unlock()
	s.reapLate.Store(true)
}

// sweep is SweepSince at the Tracking level: Kill's rounds (scan, freeze,
// kill, await gone) over the members b does not spare, without group
// kills.
func (l *trackingLevel) sweep(t *Tree, b *Baseline) Report {
	s := &t.sys
	k := t.newKiller(b)
	defer k.release()
	if l.gone {
		return k.report()
	}
	k.rounds()
	if killed := k.killedKeys(); len(killed) > 0 && s.reaps() {
		s.addLate(s.reap(t, nil, killed))
	}
	rep := k.report()
	t.log.Debug("proc: swept", "pid", t.pid, "killed", rep.Killed, "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	return rep
}
