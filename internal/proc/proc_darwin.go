//go:build darwin

package proc

import (
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// killTimeout bounds Kill.
const killTimeout = 5 * time.Second

// treeSys is the macOS state of a Tree. macOS has no parent-death signal,
// no pidfds and no readable environments of other processes: the tree is
// the root's process group plus the descendants found by parent links in
// sysctl snapshots (kern.proc.all), recorded while the links exist.
type treeSys struct {
	proc   *os.Process
	done   chan struct{}
	root   int32
	host   int32
	hostPg int32
	waited atomic.Bool

	mu    sync.Mutex       // serialises Kill; guards known
	known map[int32]uint64 // members seen: pid → start time (µs)
}

type darwinProc struct {
	pid, ppid, pgid int32
	start           uint64
	zombie          bool
}

// snapshotProcs lists every process.
func snapshotProcs() ([]darwinProc, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, err
	}
	ps := make([]darwinProc, 0, len(kps))
	for i := range kps {
		k := &kps[i]
		ps = append(ps, darwinProc{
			pid:    k.Proc.P_pid,
			ppid:   k.Eproc.Ppid,
			pgid:   k.Eproc.Pgid,
			start:  uint64(k.Proc.P_starttime.Sec)*1e6 + uint64(k.Proc.P_starttime.Usec),
			zombie: k.Proc.P_stat == 5, // SZOMB
		})
	}
	return ps, nil
}

// startOf returns the start time of pid, or false if it is gone or a zombie.
func startOf(pid int32) (uint64, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", int(pid))
	if err != nil || k.Proc.P_pid != pid || k.Proc.P_stat == 5 {
		return 0, false
	}
	return uint64(k.Proc.P_starttime.Sec)*1e6 + uint64(k.Proc.P_starttime.Usec), true
}

func start(a *Attr) (*Tree, error) {
	if err := checkAttr(a); err != nil {
		return nil, err
	}
	if a.Containment != Auto && a.Containment != Group {
		return nil, levelError(a.Containment)
	}
	files, ctty, release, err := childFiles(a)
	defer release()
	if err != nil {
		return nil, err
	}
	args, sys := rootArgs(a), sessionAttr(a, ctty)
	p, err := os.StartProcess(a.Path, args, &os.ProcAttr{Dir: a.Dir, Env: a.Env, Files: files, Sys: sys})
	if err != nil {
		return nil, err
	}
	t := &Tree{pid: p.Pid, exited: make(chan struct{}), log: loggerOf(a.Logger), start: time.Now(), level: Group}
	s := &t.sys
	s.proc, s.done, s.root = p, make(chan struct{}), int32(p.Pid)
	s.host, s.hostPg = int32(os.Getpid()), int32(unix.Getpgrp())
	s.known = map[int32]uint64{}
	go s.watch(t.exited)
	return t, nil
}

// watch closes exited when the root exits, without reaping it (kqueue
// NOTE_EXIT), so that its pid and group id stay reserved until Wait.
func (s *treeSys) watch(exited chan struct{}) {
	defer close(s.done)
	defer close(exited)
	kq, err := unix.Kqueue()
	if err != nil {
		s.proc.Wait() // no kqueue: fall back to reaping here
		return
	}
	defer unix.Close(kq)
	ev := []unix.Kevent_t{{Ident: uint64(s.root), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD | unix.EV_ONESHOT, Fflags: unix.NOTE_EXIT}}
	out := make([]unix.Kevent_t, 1)
	for {
		_, err := unix.Kevent(kq, ev, out, nil)
		if err != unix.EINTR {
			return // ESRCH: already exited
		}
		ev = nil
	}
}

func (t *Tree) snapshot() { t.sys.snapshot() }

func (t *Tree) signal(s Signal) error {
	t.sys.snapshot()
	t.log.Debug("proc: signal group", "pgid", t.pid, "signal", s.String())
	return signalGroup(t.pid, s)
}

func (t *Tree) wait() (State, error) {
	ps, err := t.reapOnce(nil)
	if err != nil {
		return State{}, err
	}
	return stateOf(ps), nil
}

// snapshot returns the live members of the tree (group and descendants by
// parent links from the root, the group and known members), recording them.
func (s *treeSys) snapshot() ([]darwinProc, error) {
	ps, err := snapshotProcs()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := map[int32]bool{}
	var queue []darwinProc
	add := func(p darwinProc) {
		if p.pid == s.host || p.pid <= 1 || in[p.pid] {
			return
		}
		in[p.pid] = true
		queue = append(queue, p)
	}
	for _, p := range ps {
		if p.pid == s.root || p.pgid == s.root || (s.known[p.pid] == p.start && p.start != 0) {
			add(p)
		}
	}
	var alive []darwinProc
	for k := 0; k < len(queue); k++ {
		p := queue[k]
		for _, c := range ps {
			if c.ppid == p.pid {
				add(c)
			}
		}
		if !p.zombie {
			alive = append(alive, p)
			s.known[p.pid] = p.start
		}
	}
	return alive, nil
}

func (t *Tree) kill() Report {
	s := &t.sys
	return t.killRounds(func() ([]darwinProc, error) {
		alive, err := s.snapshot()
		if err != nil {
			signalGroup(t.pid, Kill)
		}
		return alive, err
	}, func(alive []darwinProc) {
		var groups []int32
		for _, p := range alive {
			if p.pgid > 1 && p.pgid != s.hostPg && !slices.Contains(groups, p.pgid) {
				groups = append(groups, p.pgid)
			}
		}
		for _, g := range groups {
			unix.Kill(-int(g), unix.SIGKILL)
		}
	})
}

// killRounds kills, in rounds until none is left or killTimeout has
// passed, the processes members returns (a round ends the work when
// members fails): before each round's SIGKILLs, each to a process whose
// start time is unchanged (a guard against pid reuse), first is called
// with the round's processes (nil: nothing first). Those left at the
// deadline are the Report's survivors.
func (t *Tree) killRounds(members func() ([]darwinProc, error), first func([]darwinProc)) Report {
	begin := time.Now()
	deadline := begin.Add(killTimeout)
	var rep Report
	for {
		alive, err := members()
		if err != nil || len(alive) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			for _, p := range alive {
				rep.Survivors = append(rep.Survivors, int(p.pid))
			}
			break
		}
		if first != nil {
			first(alive)
		}
		for _, p := range alive {
			if st, ok := startOf(p.pid); ok && st == p.start {
				unix.Kill(int(p.pid), unix.SIGKILL)
				if !slices.Contains(rep.Killed, int(p.pid)) {
					rep.Killed = append(rep.Killed, int(p.pid))
				}
				t.log.Debug("proc: kill", "pid", t.pid, "member", p.pid)
			}
		}
		awaitExit(alive, deadline)
	}
	rep.Elapsed = time.Since(begin)
	return rep
}

// probe is Probe here: the only level is Group.
func probe(want Containment, _ string) (Containment, error) {
	if want != Auto && want != Group {
		return Group, levelError(want)
	}
	return Group, nil
}

// awaitExit waits until none of procs (by pid and start time) is alive, or
// until deadline, polling with a growing backoff: macOS has no pidfd.
func awaitExit(procs []darwinProc, deadline time.Time) {
	backoff := 200 * time.Microsecond
	for time.Now().Before(deadline) && slices.ContainsFunc(procs, func(p darwinProc) bool {
		st, ok := startOf(p.pid)
		return ok && st == p.start
	}) {
		time.Sleep(backoff)
		backoff = min(2*backoff, 10*time.Millisecond)
	}
}
