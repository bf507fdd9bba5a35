//go:build linux

package proc

import (
	"errors"
	"math"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A victim is a process Kill or SweepSince signals, held by a pidfd where
// the kernel has them (and, at the tracking level, maxPidfds allows).
type victim struct {
	pid     int32
	start   uint64 // 0 for a cgroup member Kill killed: its pidfd holds it
	fd      int    // pidfd, or -1
	pinned  bool   // the root: its pid cannot be reused before Wait reaps it
	killed  bool   // sent SIGKILL
	stopped bool   // sent SIGSTOP
	gone    bool   // seen exited (its pidfd is closed)
}

// gone reports whether err, from reading /proc/<pid>/... or opening a
// pidfd, says that the process does not exist. Any other error (EMFILE,
// ENOMEM, EACCES...) says nothing about the process.
func gone(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// openVictim returns a victim for p, with a pidfd if withFd, and checks,
// after opening it, that the pid still names the process of the snapshot
// (same starttime): the pidfd then refers to that process whatever happens
// to the pid later. It returns nil, nil when p has already exited, and an
// error when it cannot tell (the stat cannot be read: descriptors
// exhausted, say); the caller must then not count p as gone.
func openVictim(p procInfo, withFd bool, root int32, rootStart uint64) (*victim, error) {
	fd := -1
	if withFd {
		var err error
		fd, err = unix.PidfdOpen(int(p.pid), 0)
		if gone(err) {
			return nil, nil
		}
		if err != nil {
			fd = -1 // no pidfd: signal checks the starttime again instead
		}
	}
	v := &victim{pid: p.pid, start: p.start, fd: fd}
	// The root is not reaped before Wait: its pid names it.
	v.pinned = p.pid == root && rootStart != 0 && p.start == rootStart
	if v.pinned {
		return v, nil
	}
	if err := v.check(); err != nil {
		v.close()
		if gone(err) {
			return nil, nil
		}
		return nil, err
	}
	return v, nil
}

// check returns nil when v's pid still names v's process, alive; ESRCH
// when that process is gone (exited, a zombie, or the pid reused); any
// other error when it cannot tell.
func (v *victim) check() error {
	cur, err := readStat(v.pid)
	if err != nil {
		if gone(err) {
			return unix.ESRCH
		}
		return err
	}
	if cur.start != v.start || cur.zombie() {
		return unix.ESRCH
	}
	return nil
}

// errNoFreeze says that a victim could not be sent SIGSTOP safely.
var errNoFreeze = errors.New("proc: no pidfd to stop the process through")

// signal sends sig to v, through its pidfd or, without one held (past
// maxPidfds), through a pidfd opened for this signal and checked to name v
// (same starttime), then closed: a pid alone could have been reused. Only
// when no pidfd can be opened at all (descriptors exhausted, or a kernel
// without pidfds) does it fall back to killPid (kill(2), see
// treeSys.killPid) after a starttime check, with a gap between the two in
// which the pid could be reused only if the process exited and was reaped
// meanwhile. SIGSTOP goes only through a held pidfd (errNoFreeze
// otherwise: the caller sends SIGKILL instead), so that nothing is left
// stopped that the later SIGKILL might not reach. The root is signalled by
// pid: it is not reaped before Wait. An error other than ESRCH or EPERM
// means that v was not signalled and may be alive.
func (v *victim) signal(sig unix.Signal, killPid func(int, unix.Signal) error) error {
	if v.fd >= 0 {
		return unix.PidfdSendSignal(v.fd, sig, nil, 0)
	}
	if v.pinned {
		return killPid(int(v.pid), sig)
	}
	if sig == unix.SIGSTOP {
		// Stop only what a held pidfd pins: a process stopped through a
		// one-off pidfd could not be reached again for its SIGKILL if
		// descriptors run out meanwhile, and would stay stopped.
		return errNoFreeze
	}
	fd, err := unix.PidfdOpen(int(v.pid), 0)
	if err == nil {
		defer unix.Close(fd)
		if err := v.check(); err != nil {
			return err
		}
		return unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	if gone(err) {
		return unix.ESRCH
	}
	if err := v.check(); err != nil {
		return err
	}
	return killPid(int(v.pid), sig)
}

// exited reports whether v has exited (a zombie counts as gone). A
// process whose state cannot be read has not.
func (v *victim) exited() bool {
	if v.fd >= 0 {
		// A pidfd polls readable once its process has exited.
		fds := []unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	return v.check() == unix.ESRCH
}

func (v *victim) close() {
	if v.fd >= 0 {
		unix.Close(v.fd)
		v.fd = -1
	}
}

// A killer is the state of one Kill or SweepSince at the tracking level.
// Each works in rounds (see rounds), each one the same steps:
//
//   - scan /proc for the members to kill (scan, targets);
//   - freeze them, scanning again until no new one appears (freeze);
//   - kill them, through checked pidfds, and the tree's process groups
//     when it is a Kill (killAll);
//   - await them gone (awaitGone);
//   - report those that are not as survivors (survive, giveUp).
//
// When a scan or a signal cannot be had, fallback kills what it can reach
// without one and gives up. A sweep (spare not nil) differs from a Kill
// only in what it leaves alone: the root, the members spare spares, and
// every process group (the root's holds spared members).
type killer struct {
	t        *Tree
	s        *treeSys
	begin    time.Time
	deadline time.Time
	timer    *time.Timer
	expired  <-chan time.Time // fires at deadline
	minStart uint64           // for scans: environments of processes started since
	victims  map[int32]*victim
	fds      int              // pidfds open
	denied   map[procKey]bool // members that refused a signal (EPERM)
	unsureOf map[procKey]bool // members listed as survivors by unsure
	fellBack bool             // in fallback: no more scans
	// after, if not zero, is when the root was seen exited, before this
	// Kill: its first scan may be one that started since (see scan).
	after time.Time
	last  *snapshot      // the last scan
	ids   map[int32]bool // the pids of the members (zombies too) in the last scan
	rep   Report
	// spare, if not nil, makes this a sweep (SweepSince): the root and
	// the members spare spares are left alone, and no process group is
	// killed (the root's holds spared members).
	spare *Baseline
}

// newKiller begins one Kill (spare nil) or SweepSince (see killer) of t
// at the tracking level, bounded by killTimeout from now. It takes
// t.sys.mu, which serialises Kills and sweeps, and holds it until
// release.
func (t *Tree) newKiller(spare *Baseline) *killer {
	s := &t.sys
	s.mu.Lock()
	begin := time.Now()
	timer := time.NewTimer(s.tune.killTimeout)
	k := &killer{
		t: t, s: s,
		begin:    begin,
		deadline: begin.Add(s.tune.killTimeout),
		timer:    timer,
		expired:  timer.C,
		minStart: math.MaxUint64,
		victims:  map[int32]*victim{},
		denied:   map[procKey]bool{},
		unsureOf: map[procKey]bool{},
		spare:    spare,
	}
	if s.marker != "" {
		k.minStart = s.rootStart
	}
	return k
}

// release ends k: it closes the pidfds k holds, stops its timer and
// lets the next Kill or sweep begin.
func (k *killer) release() {
	k.timer.Stop()
	for _, v := range k.victims {
		v.close()
	}
	k.s.mu.Unlock()
}

// report returns what k did, and how long it took.
func (k *killer) report() Report {
	k.rep.Elapsed = time.Since(k.begin)
	return k.rep
}

// kill is Kill at the Tracking level.
func (l *trackingLevel) kill(t *Tree) Report {
	s := &t.sys
	k := t.newKiller(nil)
	defer k.release()
	if l.gone {
		// Membership is known complete: nothing to scan for.
		return k.report()
	}
	if isClosed(t.exited) {
		k.after = l.exitedAt
	}
	last := k.rounds()
	if last != nil {
		l.gone = !last.unsure
	}
	if s.reaps() {
		late := s.reap(t, k.last, k.killedKeys())
		s.knownMu.Lock()
		s.late = late
		s.knownMu.Unlock()
		s.reapLate.Store(last == nil || len(late) > 0)
	}
	rep := k.report()
	t.log.Debug("proc: killed", "pid", t.pid, "killed", len(rep.Killed), "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	return rep
}

// rounds scans the tree and kills what the scan found (see round), again
// and again, until a scan finds nothing left to kill: for a Kill, no live
// member, once the root has exited. It returns that scan, or nil when the
// work ended otherwise (a scan missing, the deadline, survivors), as k.rep
// then says.
func (k *killer) rounds() *snapshot {
	for scans := 1; ; scans++ {
		sn, ok := k.scan()
		if !ok {
			k.fallback(nil)
			return nil
		}
		targets := k.targets(sn)
		if len(targets) == 0 {
			if k.spare == nil {
				if !k.rootExited() {
					// The scan found no live member, yet the root has
					// not exited: something is wrong with what the scan
					// saw.
					k.t.log.Debug("proc: root missing from scan", "pid", k.t.pid)
					k.fallback(nil)
					return nil
				}
				k.t.log.Debug("proc: tree gone", "pid", k.t.pid, "scans", scans)
			}
			return sn
		}
		if !k.round(targets) {
			return nil
		}
	}
}

// round freezes, kills and awaits the targets a scan found. It reports
// whether the caller should scan again; when it does not, what happened
// is recorded in k (through fallback when a member could not be stopped
// or signalled, giveUp when the deadline passed, survive when the killed
// did not all exit).
func (k *killer) round(targets []procInfo) bool {
	targets, ok := k.freeze(targets)
	if !ok {
		k.fallback(targets)
		return false
	}
	pending, ok := k.killAll(targets)
	if !ok {
		// A member could not be signalled (its state unreadable):
		// scanning again would find it again; kill what can be
		// reached and report the rest.
		k.fallback(targets)
		return false
	}
	if !time.Now().Before(k.deadline) {
		// Out of time: whatever was found has had its SIGKILL, even if
		// the scan that found it ended past the deadline.
		k.giveUp(pending)
		return false
	}
	if left := k.awaitGone(pending, k.deadline); len(left) > 0 {
		k.survive(left)
		return false
	}
	return true
}

// scan takes a snapshot, waiting for it no later than the deadline; ok is
// false when there is none (the scan failed, or is still running).
//
// The first scan of a Kill called after the root exited may be one that
// is already running, if it started after the exit: it sees every member
// left then, the orphans the root's exit made included, as one started
// now would (a member that forks since is alive in it, and the freeze
// that follows scans again). Later scans start after the call.
func (k *killer) scan() (*snapshot, bool) {
	after := k.after
	k.after = time.Time{}
	sn, err, ok := k.s.scanner().scanAfter(&k.s.tune, after, k.minStart, k.s.rootStart, nil, k.expired)
	if ok && err == nil {
		k.last = sn
		return sn, true
	}
	k.t.log.Debug("proc: no scan", "pid", k.t.pid, "err", err, "timeout", !ok)
	return nil, false
}

// rootExited waits briefly for the root to be seen exited: a scan that
// shows it as a zombie may end before run's waitid returns.
func (k *killer) rootExited() bool {
	select {
	case <-k.t.exited:
		return true
	default:
	}
	timer := time.NewTimer(min(k.s.tune.rootExitWait, max(time.Until(k.deadline), 0)))
	defer timer.Stop()
	select {
	case <-k.t.exited:
		return true
	case <-timer.C:
		return false
	}
}

// targets returns the members in sn to kill: the live ones, less those
// that refused a signal and, in a sweep, those it spares.
func (k *killer) targets(sn *snapshot) []procInfo {
	alive, ids := k.s.memberSet(sn)
	k.ids = ids
	return slices.DeleteFunc(alive, func(p procInfo) bool {
		if k.spare != nil && (p.pid == k.s.root || spared(k.spare, p.pid, p.start, -1)) {
			return true
		}
		return k.denied[procKey{p.pid, p.start}]
	})
}

// fallback kills, without another scan, what can be reached without one,
// then waits briefly and gives up: the targets found (found), and every
// victim not seen gone, those a freeze stopped among them (nothing may
// stay stopped); for a Kill also the root, its process group (see
// killAll) and the known members. Members it cannot signal (their state
// unreadable) are survivors.
func (k *killer) fallback(found []procInfo) {
	k.fellBack = true
	seen := map[int32]bool{}
	var all []procInfo
	add := func(p procInfo) {
		if !seen[p.pid] && !k.denied[procKey{p.pid, p.start}] {
			seen[p.pid] = true
			all = append(all, p)
		}
	}
	if k.spare == nil {
		add(procInfo{pid: k.s.root, start: k.s.rootStart})
	}
	for _, p := range found {
		add(p)
	}
	for _, v := range k.victims {
		if !v.gone {
			add(procInfo{pid: v.pid, start: v.start})
		}
	}
	if k.spare == nil {
		k.s.knownMu.Lock()
		for pid, start := range k.s.known {
			add(procInfo{pid: pid, start: start})
		}
		k.s.knownMu.Unlock()
	}
	pending, _ := k.killAll(all)
	k.giveUp(pending)
}

// freeze stops every member with SIGSTOP and scans again, until a scan
// finds no member that is not stopped yet, and returns the members. A
// stopped process cannot fork, and it keeps its parent links: a child
// forked between a scan and the SIGSTOP is found by its parent in the next
// scan, even if it left the session and cleared its environment; killing
// the parent first would have orphaned it with no link left. SIGKILL ends
// stopped processes all the same. ok is false when a scan was missing
// (then the members already found are returned, to be killed).
//
// It runs whenever a member is alive, the root alone too: the root can
// fork such a child between a scan and its SIGKILL as well. This costs
// one scan more; Kill after a normal exit with nothing left does not get
// here.
func (k *killer) freeze(alive []procInfo) ([]procInfo, bool) {
	stopped := map[procKey]bool{}
	for {
		fresh := false
		for _, p := range alive {
			key := procKey{p.pid, p.start}
			if stopped[key] {
				continue
			}
			stopped[key] = true
			v, err := k.victim(p)
			if err != nil {
				return alive, false
			}
			if v == nil {
				continue
			}
			err = v.signal(unix.SIGSTOP, k.s.killPid)
			if err == errNoFreeze {
				// It cannot be stopped safely: kill it now.
				err = v.signal(unix.SIGKILL, k.s.killPid)
				k.t.log.Debug("proc: kill unfrozen", "pid", k.t.pid, "member", v.pid, "err", err)
				if err == nil || err == unix.ESRCH {
					k.killed(v)
					fresh = true
					continue
				}
			}
			switch {
			case err == unix.EPERM:
				k.deny(v)
				continue
			case err != nil && err != unix.ESRCH:
				k.t.log.Debug("proc: stop failed", "pid", k.t.pid, "member", v.pid, "err", err)
				return alive, false
			}
			v.stopped = true
			fresh = true
		}
		if !fresh || !time.Now().Before(k.deadline) {
			return alive, true
		}
		sn, ok := k.scan()
		if !ok {
			return alive, false
		}
		// Members that were stopped but are missing from the new scan
		// have exited; the new scan has every live one.
		alive = k.targets(sn)
	}
}

// victim returns the victim for p, opening one if needed: nil, nil if p is
// gone, an error if that cannot be told.
func (k *killer) victim(p procInfo) (*victim, error) {
	v := k.victims[p.pid]
	if v != nil && v.start != p.start {
		k.closeVictim(v)
		delete(k.victims, p.pid)
		v = nil
	}
	if v == nil {
		var err error
		if v, err = openVictim(p, k.fds < k.s.tune.maxPidfds, k.s.root, k.s.rootStart); v == nil {
			if err != nil {
				k.t.log.Debug("proc: cannot check member", "pid", k.t.pid, "member", p.pid, "err", err)
			}
			return nil, err
		}
		if v.fd >= 0 {
			k.fds++
		}
		k.victims[p.pid] = v
	}
	return v, nil
}

func (k *killer) closeVictim(v *victim) {
	if v.fd >= 0 {
		k.fds--
	}
	v.close()
}

// deny records that v refused a signal (EPERM: a setuid program, say):
// it is a survivor at once, and Kill does not wait for it.
func (k *killer) deny(v *victim) {
	k.t.log.Debug("proc: not permitted", "pid", k.t.pid, "member", v.pid)
	k.denied[procKey{v.pid, v.start}] = true
	k.rep.Survivors = append(k.rep.Survivors, int(v.pid))
	k.closeVictim(v)
	v.gone = true
}

// killAll sends SIGKILL to each live member and to the tree's process
// groups they are in, and returns the victims to wait for. ok is false
// when a member could not be signalled and may be alive; it is then
// listed as a survivor.
//
// A group is the tree's only if its id is the root's pid or the pid of a
// member present in the last scan (alive or a zombie, so the id names
// the same group): a member found by its marker or known may sit in an
// older, unrelated group (a daemon's that started a worker for it), and
// killing that group would kill the daemon. Members in other groups are
// killed one by one.
func (k *killer) killAll(alive []procInfo) (pending []*victim, ok bool) {
	ok = true
	// Every victim that a freeze stopped gets SIGKILL too, whatever the
	// latest scan says: a stopped process never resumes on its own, and
	// its pidfd (or starttime) pins its identity. A scan can miss it
	// (its links gone, known forgotten); it must not stay stopped.
	in := make(map[int32]bool, len(alive))
	for _, p := range alive {
		in[p.pid] = true
	}
	for _, v := range k.victims {
		if v.stopped && !v.gone && !in[v.pid] {
			alive = append(alive, procInfo{pid: v.pid, start: v.start})
		}
	}
	// Open every victim first, while each process still exists: a
	// pidfd cannot be opened, nor a starttime checked, once the group
	// kill has made it a zombie.
	var groups []int32
	if k.fellBack && k.spare == nil {
		groups = append(groups, k.s.root)
	}
	var victims []*victim
	for _, p := range alive {
		v, err := k.victim(p)
		if err != nil {
			k.unsure(p, err)
			ok = false
			continue
		}
		if v == nil {
			continue
		}
		victims = append(victims, v)
		if g := p.pgrp; k.spare == nil && g > 1 && g != k.s.hostPgid && (g == k.s.root || k.ids[g]) && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	// Groups first: a group kill reaches every process of the group at
	// once, including one forked into it since the scan. The root's
	// group id cannot have been reused: the root is not reaped before
	// Wait. Another group's id is the pid of a member that the scan
	// found present; it could name a different group by now only if,
	// since the scan, that member and every process of its group had
	// exited and been reaped and the id had been handed to a new group
	// leader: the freeze keeps the members found stopped, so they do not
	// exit on their own. This is a gap of microseconds that needs a pid
	// wrap-around inside it.
	for _, g := range groups {
		err := unix.Kill(-int(g), unix.SIGKILL)
		k.t.log.Debug("proc: kill group", "pid", k.t.pid, "pgid", g, "err", err)
	}
	for _, v := range victims {
		err := v.signal(unix.SIGKILL, k.s.killPid)
		k.t.log.Debug("proc: kill", "pid", k.t.pid, "member", v.pid, "pidfd", v.fd >= 0, "err", err)
		if err == unix.EPERM {
			k.deny(v)
			continue
		}
		if err != nil && err != unix.ESRCH {
			k.unsure(procInfo{pid: v.pid, start: v.start}, err)
			ok = false
			continue
		}
		k.killed(v)
		pending = append(pending, v)
	}
	return pending, ok
}

// killed records that v was sent SIGKILL.
func (k *killer) killed(v *victim) {
	if !v.killed {
		v.killed = true
		k.rep.Killed = append(k.rep.Killed, int(v.pid))
	}
}

// unsure records that p could not be signalled and may be alive: it is a
// survivor unless a group kill reaches it.
func (k *killer) unsure(p procInfo, err error) {
	k.t.log.Debug("proc: cannot signal member", "pid", k.t.pid, "member", p.pid, "err", err)
	key := procKey{p.pid, p.start}
	if k.fellBack && !k.unsureOf[key] {
		k.unsureOf[key] = true
		k.rep.Survivors = append(k.rep.Survivors, int(p.pid))
	}
}

// killedKeys returns the processes k sent SIGKILL, but the root (Wait
// reaps it).
func (k *killer) killedKeys() []procKey {
	var keys []procKey
	for _, v := range k.victims {
		if v.killed && !v.pinned {
			keys = append(keys, procKey{v.pid, v.start})
		}
	}
	return keys
}

// awaitGone is awaitGone for k's victims: it keeps count of the pidfds k
// holds.
func (k *killer) awaitGone(pending []*victim, until time.Time) []*victim {
	held := heldPidfds(pending)
	left := awaitGone(pending, until)
	k.fds -= held - heldPidfds(left)
	return left
}

// giveUp waits tune.lastGrace at most for pending, which has just been sent
// SIGKILL, and lists what is left as survivors.
func (k *killer) giveUp(pending []*victim) {
	k.survive(k.awaitGone(pending, time.Now().Add(k.s.tune.lastGrace)))
}

// survive lists left, victims that have not exited in time, as survivors.
func (k *killer) survive(left []*victim) {
	k.rep.survive(left)
	if len(left) > 0 {
		k.t.log.Debug("proc: kill gave up", "pid", k.t.pid, "survivors", k.rep.Survivors)
	}
}

// survive lists left, victims that have not exited in time, as survivors.
func (r *Report) survive(left []*victim) {
	for _, v := range left {
		r.Survivors = append(r.Survivors, int(v.pid))
	}
}

// awaitGone waits until every victim in pending has exited, or until
// until, and returns those that have not; it looks at least once, even
// past until. It closes each victim's pidfd as soon as the victim is seen
// gone. While every victim left holds a pidfd it sleeps in poll(2), which
// wakes as one exits; else it looks again after a backoff from 200µs to
// 10ms: a killed process usually takes microseconds to go, one stuck in
// the kernel may take much longer.
func awaitGone(pending []*victim, until time.Time) []*victim {
	backoff := 200 * time.Microsecond
	var poll []unix.PollFd
	polled := false // poll's revents say which of pending have exited
	for {
		pending = slices.DeleteFunc(pending, func(v *victim) bool {
			if !v.gone && !(polled && v.fd >= 0) && v.exited() {
				v.gone = true
			}
			if v.gone {
				v.close()
				return true
			}
			return false
		})
		wait := time.Until(until)
		if len(pending) == 0 || wait <= 0 {
			return pending
		}
		polled = false
		if heldPidfds(pending) == len(pending) {
			poll = poll[:0]
			for _, v := range pending {
				poll = append(poll, unix.PollFd{Fd: int32(v.fd), Events: unix.POLLIN})
			}
			_, err := unix.Poll(poll, int(wait/time.Millisecond)+1)
			if err == nil {
				polled = true
				for i, v := range pending {
					if poll[i].Revents != 0 {
						v.gone = true
					}
				}
				continue
			}
			if err == unix.EINTR {
				continue
			}
		}
		time.Sleep(min(backoff, wait))
		backoff = min(2*backoff, 10*time.Millisecond)
	}
}

// heldPidfds counts the victims in vs that hold a pidfd.
func heldPidfds(vs []*victim) int {
	n := 0
	for _, v := range vs {
		if v.fd >= 0 {
			n++
		}
	}
	return n
}
