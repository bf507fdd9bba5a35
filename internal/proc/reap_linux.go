//go:build linux

package proc

import (
	"errors"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reap reaps the tree's zombies that were re-parented to the host (a
// child subreaper, or PID 1): those in sn that are the tree's, and extra
// (processes this Kill sent SIGKILL). It never waits for any other child:
// the host's other children, including other Trees' roots, keep their
// statuses. The root is left to Wait. It returns the zombies it could not
// reap yet (their parent still exiting, say), for Wait to try again.
//
// A zombie's environment cannot be read, so a zombie is the tree's if it
// was killed by this Kill, was seen alive as a member (known, same
// starttime), is a member of sn by the rules of members, or is in a
// session or group whose id is a known member's pid (a member that is
// gone: its session or group outlives it). An orphan that left the
// session, cleared its environment and exited, all between two of the
// tracker's snapshots, is none of these: it stays a zombie child of the
// host until the host exits (it holds no resources but its pid and exit
// status).
func (s *treeSys) reap(t *Tree, sn *snapshot, extra []procKey) []procKey {
	zombies := slices.Clone(extra)
	for _, z := range s.zombies(sn) {
		if !slices.Contains(zombies, z) {
			zombies = append(zombies, z)
		}
	}
	// A thread-group leader shows as a zombie while its other threads are
	// still exiting, and cannot be reaped until they are gone; and a
	// zombie re-parents to the host only once its parent's threads are
	// all gone: try again for a little while.
	backoff := 100 * time.Microsecond
	for end := time.Now().Add(s.tune.reapWait); ; {
		zombies = slices.DeleteFunc(zombies, func(z procKey) bool {
			done, err := s.reapOne(z)
			if done && err == nil {
				t.log.Debug("proc: reaped orphan", "pid", t.pid, "orphan", z.pid)
			}
			return done
		})
		if len(zombies) == 0 || time.Now().After(end) {
			return zombies
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Millisecond)
	}
}

// zombies returns the tree's zombies in sn (nil: none), but the root.
func (s *treeSys) zombies(sn *snapshot) []procKey {
	if sn == nil {
		return nil
	}
	_, ids := s.memberSet(sn)
	var zombies []procKey
	s.knownMu.Lock()
	// leader reports whether id is the pid of a known member that is
	// either still in sn with its starttime or gone from sn (then the
	// session or group that still bears its id is the member's).
	leader := func(id int32) bool {
		start, ok := s.known[id]
		if !ok {
			return false
		}
		i, ok := sn.find(id)
		return !ok || sn.procs[i].start == start
	}
	for _, p := range sn.procs {
		if !p.zombie() || p.pid == s.root || p.start < s.rootStart {
			continue
		}
		// A session or group led by the zombie itself counts only by
		// its own starttime.
		if ids[p.pid] || s.known[p.pid] == p.start ||
			(p.sid != p.pid && leader(p.sid)) || (p.pgrp != p.pid && leader(p.pgrp)) {
			zombies = append(zombies, procKey{p.pid, p.start})
		}
	}
	s.knownMu.Unlock()
	return zombies
}

// errNotOurs says that reapOne left a process alone: gone, reused, or the
// child of a live parent other than the host (which reaps it).
var errNotOurs = errors.New("proc: not the host's to reap")

// reapOne reaps z if it is a zombie child of the host, through a pidfd
// opened and checked to name z (same starttime): waiting by pid could take
// the status of another child that was given z's pid after z was reaped.
// done is false when z may become reapable later (not waitable yet, or
// its parent still exiting).
func (s *treeSys) reapOne(z procKey) (done bool, err error) {
	if z.pid == s.root {
		return true, errNotOurs // Wait's
	}
	fd, err := unix.PidfdOpen(int(z.pid), 0)
	if err != nil {
		return gone(err), err
	}
	defer unix.Close(fd)
	cur, err := readStat(z.pid)
	if err != nil {
		return gone(err), err
	}
	if cur.start != z.start {
		return true, errNotOurs
	}
	if cur.ppid != s.host {
		// It re-parents to the host once its parent's last thread is
		// gone; a live parent reaps it itself.
		if par, err := readStat(cur.ppid); err == nil && !par.zombie() {
			return true, errNotOurs
		}
		return false, errNotOurs
	}
	var info unix.Siginfo
	err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
	switch {
	case err == unix.ECHILD:
		return false, err // not the host's child yet
	case err != nil:
		return true, err // EINVAL: no P_PIDFD (Linux < 5.4); never by pid
	case info.Signo == 0:
		return false, unix.EAGAIN // alive, or its threads still exiting
	}
	return true, nil
}

// reaps reports whether the host must reap the tree's orphans: it is a
// child subreaper (by Attr.Subreaper or otherwise: another Tree's, say),
// or PID 1, to which orphans re-parent too (a container's entrypoint).
func (s *treeSys) reaps() bool {
	return s.subreaper || s.host == 1 || isSubreaper()
}

// isSubreaper reports whether the host is a child subreaper.
func isSubreaper() bool {
	var v int32
	_, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0, 0)
	return errno == 0 && v != 0
}
