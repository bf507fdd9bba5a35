//go:build linux

package proc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// killTimeout bounds Kill.
const killTimeout = 5 * time.Second

// treeSys is the Linux state of a Tree.
type treeSys struct {
	proc      *os.Process
	done      chan struct{} // closed when the goroutine that forked has returned
	root      int32
	rootStart uint64 // the root's starttime; 0 if unknown
	marker    string
	subreaper bool
	host      int32
	hostPgid  int32
	waited    atomic.Bool

	mu      sync.Mutex       // serialises Kill
	knownMu sync.Mutex       // guards known
	known   map[int32]uint64 // every live member seen by a scan: pid → starttime
}

func start(a *Attr) (*Tree, error) {
	if err := checkAttr(a); err != nil {
		return nil, err
	}
	files, ctty, release, err := childFiles(a)
	defer release()
	if err != nil {
		return nil, err
	}
	if a.Subreaper {
		// Idempotent: setting it again changes nothing.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("proc: set child subreaper: %w", err)
		}
	}
	args := a.Args
	if len(args) == 0 {
		args = []string{a.Path}
	}
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if a.TTY != nil {
		sys.Setctty = true
		sys.Ctty = ctty
	}
	attr := &os.ProcAttr{Dir: a.Dir, Env: a.Env, Files: files, Sys: sys}

	t := &Tree{exited: make(chan struct{}), log: loggerOf(a.Logger), start: time.Now()}
	s := &t.sys
	s.done = make(chan struct{})
	s.marker = a.Marker
	s.subreaper = a.Subreaper
	s.host = int32(os.Getpid())
	s.hostPgid = int32(unix.Getpgrp())
	s.known = map[int32]uint64{}
	if s.marker != "" {
		// Before the fork, so that no scan can read a marked environment
		// without knowing the marker (see envResult).
		theScanner().register(s.marker)
	}
	started := make(chan error, 1)
	go s.run(a.Path, args, attr, t.exited, started)
	if err := <-started; err != nil {
		<-s.done
		if s.marker != "" {
			theScanner().unregister(s.marker)
		}
		return nil, err
	}
	t.pid = s.proc.Pid
	s.root = int32(t.pid)
	// The root cannot be reaped before Wait, so its stat is readable.
	if p, err := readStat(s.root); err == nil {
		s.rootStart = p.start
	}
	t.log.Debug("proc: started", "pid", t.pid, "path", a.Path)
	return t, nil
}

// run forks the root and waits for it to exit without reaping it.
//
// The parent-death signal is sent when the thread that forked the child
// exits, not when the host process does; a goroutine's thread may exit
// whenever the runtime likes. So the fork happens on a locked thread, and
// the thread stays locked, blocked in waitid, until the root has exited.
// WNOWAIT leaves the root a zombie, so its pid and process-group id cannot
// be reused until Wait reaps it.
func (s *treeSys) run(path string, args []string, attr *os.ProcAttr, exited chan struct{}, started chan<- error) {
	defer close(s.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess(path, args, attr)
	if err != nil {
		started <- err
		return
	}
	s.proc = p
	started <- nil
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	close(exited)
}

func (t *Tree) signal(s Signal) error {
	if t.sys.marker == "" {
		// A signal may make a CLI exit and orphan tools it started in
		// other sessions (CLI-FACTS.md, "Cancellation behaviour"). Without
		// a marker only the parent links, recorded now while they exist,
		// let Kill find those orphans later. With a marker the scan is
		// not needed, and the signal goes out without its delay.
		if sn, err := theScanner().scanSince(math.MaxUint64, t.sys.rootStart); err == nil {
			t.sys.members(sn)
		}
	}
	t.log.Debug("proc: signal group", "pgid", t.pid, "signal", s.String())
	return signalGroup(t.pid, s)
}

func (t *Tree) wait() (State, error) {
	s := &t.sys
	if s.waited.Swap(true) {
		return State{}, errors.New("proc: Wait called twice")
	}
	<-t.exited
	ps, err := s.proc.Wait()
	<-s.done
	if s.marker != "" {
		theScanner().unregister(s.marker)
	}
	if err != nil {
		return State{}, fmt.Errorf("proc: wait: %w", err)
	}
	st := stateOf(ps)
	t.log.Debug("proc: reaped", "pid", t.pid, "code", st.Code, "signal", st.Signal)
	return st, nil
}

// A victim is a process Kill has sent SIGKILL, held by a pidfd where the
// kernel has them.
type victim struct {
	pid   int32
	start uint64
	fd    int // pidfd, or -1
}

// openVictim opens a pidfd for p and checks, after opening it, that the
// pid still names the process of the snapshot (same starttime): the pidfd
// then refers to that process whatever happens to the pid later. It
// returns nil when p has already exited.
func openVictim(p procInfo) *victim {
	fd, err := unix.PidfdOpen(int(p.pid), 0)
	if err == unix.ESRCH {
		return nil
	}
	if err != nil {
		fd = -1 // no pidfds: signal checks the starttime again instead
	}
	v := &victim{pid: p.pid, start: p.start, fd: fd}
	if !v.same() {
		v.close()
		return nil
	}
	return v
}

// same reports whether v's pid still names v's process, alive.
func (v *victim) same() bool {
	cur, err := readStat(v.pid)
	return err == nil && cur.start == v.start && !cur.zombie()
}

func (v *victim) kill() error {
	if v.fd >= 0 {
		return unix.PidfdSendSignal(v.fd, unix.SIGKILL, nil, 0)
	}
	if !v.same() {
		return nil
	}
	return unix.Kill(int(v.pid), unix.SIGKILL)
}

// gone reports whether v has exited (a zombie counts as gone).
func (v *victim) gone() bool {
	if v.fd >= 0 {
		// A pidfd polls readable once its process has exited.
		fds := []unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	return !v.same()
}

func (v *victim) close() {
	if v.fd >= 0 {
		unix.Close(v.fd)
		v.fd = -1
	}
}

func (t *Tree) kill() Report {
	s := &t.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := time.Now()
	deadline := begin.Add(killTimeout)
	var rep Report
	victims := map[int32]*victim{}
	defer func() {
		for _, v := range victims {
			v.close()
		}
	}()
	minStart := uint64(math.MaxUint64)
	if s.marker != "" {
		minStart = s.rootStart
	}
	var last *snapshot
	for scans := 1; ; scans++ {
		sn, err := theScanner().scanSince(minStart, s.rootStart)
		if err != nil {
			// Without /proc only the group can be reached.
			t.log.Debug("proc: scan failed", "pid", t.pid, "err", err)
			signalGroup(t.pid, Kill)
			break
		}
		last = sn
		alive := s.members(sn)
		if len(alive) == 0 {
			t.log.Debug("proc: tree gone", "pid", t.pid, "scans", scans)
			break
		}
		if !time.Now().Before(deadline) {
			for _, p := range alive {
				rep.Survivors = append(rep.Survivors, int(p.pid))
			}
			t.log.Debug("proc: kill gave up", "pid", t.pid, "survivors", rep.Survivors)
			break
		}
		pending := s.killAll(t, alive, victims, &rep)
		awaitGone(pending, deadline)
	}
	if last != nil && (s.subreaper || isSubreaper()) {
		// Also when another Tree made the host a subreaper: this tree's
		// orphans re-parent to the host all the same.
		s.reap(t, last, victims)
	}
	rep.Elapsed = time.Since(begin)
	t.log.Debug("proc: killed", "pid", t.pid, "killed", len(rep.Killed), "elapsed", rep.Elapsed)
	return rep
}

// members returns the live processes of the tree in sn and records them as
// known, so that later scans still find them after their parent links are
// gone: the root, its process group and session, the processes carrying
// the marker, those seen before, and every descendant of any of these.
// Only processes started at or after the root count: every process of the
// tree did, and the snapshot may or may not hold older ones (see scanner),
// so ignoring them all keeps the answer independent of that.
func (s *treeSys) members(sn *snapshot) []procInfo {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
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
	for i := range sn.procs {
		p := &sn.procs[i]
		if p.pid == s.root || p.pgrp == s.root || p.sid == s.root {
			add(i)
		}
	}
	if s.marker != "" {
		for _, pid := range sn.marked[s.marker] {
			if i, ok := sn.find(pid); ok && sn.procs[i].start >= s.rootStart {
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
	for k := 0; k < len(queue); k++ {
		p := sn.procs[queue[k]]
		for _, c := range sn.children(p.pid) {
			add(int(c))
		}
		if !p.zombie() {
			alive = append(alive, p)
			s.known[p.pid] = p.start
		}
	}
	return alive
}

// killAll sends SIGKILL to each live member and to each process group they
// are in (except the host's), and returns the victims to wait for.
func (s *treeSys) killAll(t *Tree, alive []procInfo, victims map[int32]*victim, rep *Report) []*victim {
	var pending []*victim
	var groups []int32
	for _, p := range alive {
		v := victims[p.pid]
		if v != nil && v.start != p.start {
			v.close()
			v = nil
		}
		if v == nil {
			if v = openVictim(p); v == nil {
				continue
			}
			victims[p.pid] = v
			rep.Killed = append(rep.Killed, int(p.pid))
		}
		pending = append(pending, v)
		if p.pgrp > 1 && p.pgrp != s.hostPgid && !slices.Contains(groups, p.pgrp) {
			groups = append(groups, p.pgrp)
		}
	}
	// A member of each group was alive when its victim was opened, so the
	// group id still names that group: group ids are pids, and a pid is
	// not reused while a process still belongs to the group.
	for _, g := range groups {
		err := unix.Kill(-int(g), unix.SIGKILL)
		t.log.Debug("proc: kill group", "pid", t.pid, "pgid", g, "err", err)
	}
	for _, v := range pending {
		err := v.kill()
		t.log.Debug("proc: kill", "pid", t.pid, "member", v.pid, "pidfd", v.fd >= 0, "err", err)
	}
	return pending
}

// awaitGone polls until every victim has exited or the deadline passes,
// backing off from 200µs to 10ms: a killed process usually takes
// microseconds to go, one stuck in the kernel may take much longer.
func awaitGone(pending []*victim, deadline time.Time) {
	backoff := 200 * time.Microsecond
	for {
		pending = slices.DeleteFunc(pending, (*victim).gone)
		if len(pending) == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 10*time.Millisecond)
	}
}

// reap reaps, by pid, the tree's zombies that were re-parented to the host
// (a child subreaper). It never waits for any child: the host's other
// children, including other Trees' roots, keep their statuses. The root is
// left to Wait.
func (s *treeSys) reap(t *Tree, sn *snapshot, victims map[int32]*victim) {
	for _, p := range sn.procs {
		if !p.zombie() || p.ppid != s.host || p.pid == s.root || p.start < s.rootStart {
			continue
		}
		v := victims[p.pid]
		s.knownMu.Lock()
		known := s.known[p.pid] == p.start
		s.knownMu.Unlock()
		ours := (v != nil && v.start == p.start) || known ||
			p.pgrp == s.root || p.sid == s.root
		if !ours {
			continue
		}
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, int(p.pid), &info, unix.WEXITED|unix.WNOHANG, nil)
		t.log.Debug("proc: reaped orphan", "pid", t.pid, "orphan", p.pid, "err", err)
	}
}

// isSubreaper reports whether the host is a child subreaper.
func isSubreaper() bool {
	var v int32
	_, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0, 0)
	return errno == 0 && v != 0
}
