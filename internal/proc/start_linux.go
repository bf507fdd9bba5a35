//go:build linux

package proc

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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
	// reapLate says that a Kill ended without a scan after its last
	// SIGKILL, so it could not reap what it killed; Wait tries again.
	reapLate atomic.Bool

	mu      sync.Mutex // serialises Kill
	knownMu sync.Mutex // guards known
	// known holds every member seen alive by a scan (pid → starttime), so
	// that later scans still find it after its parent links are gone.
	// Entries of processes that are gone (not even zombies) are dropped,
	// unless a process still bears their pid as session or group id.
	known map[int32]uint64
	// late holds the zombies Kill could not reap yet (see reap).
	late []procKey
	// applied is the sequence number of the newest snapshot applied to
	// known (see members).
	applied uint64

	// cg is the tree's cgroup at the Cgroup level, else nil; nothing of
	// the tracking state above is used then.
	cg *runCgroup
	// cgEmpty says that Kill found the cgroup empty after the root had
	// exited: nothing can enter it any more. Guarded by mu.
	cgEmpty bool
	// gone says that, at the tracking level, Kill found no member left
	// after the root had exited, by a scan that read every environment it
	// had to: no member is left to start another, so a later Kill has
	// nothing to look for. Guarded by mu.
	gone bool
	// exitedAt is when run saw the root exit (tracking); set before
	// exited is closed.
	exitedAt time.Time
	// tune holds the bounds Kill and the tracker work with.
	tune tuning
}

func start(a *Attr) (*Tree, error) {
	if err := checkAttr(a); err != nil {
		return nil, err
	}
	log := loggerOf(a.Logger)
	cg, err := containment(a, log)
	if err != nil {
		return nil, err
	}
	files, ctty, release, err := childFiles(a)
	defer release()
	if err != nil {
		if cg != nil {
			cg.removeAll()
		}
		return nil, err
	}
	args, sys := rootArgs(a), sessionAttr(a, ctty)
	attr := &os.ProcAttr{Dir: a.Dir, Env: a.Env, Files: files, Sys: sys}
	t := &Tree{exited: make(chan struct{}), log: log, start: time.Now()}
	s := &t.sys
	s.done = make(chan struct{})
	s.tune = defaultTuning
	if a.tune != nil {
		s.tune = *a.tune
	}
	s.host = int32(os.Getpid())
	s.hostPgid = int32(unix.Getpgrp())
	if a.Subreaper {
		// Idempotent: setting it again changes nothing.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			if cg != nil {
				cg.removeAll()
			}
			return nil, fmt.Errorf("proc: set child subreaper: %w", err)
		}
	}
	s.subreaper = a.Subreaper
	if cg != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, cg.fd
		p, err := os.StartProcess(a.Path, args, attr)
		if err == nil {
			t.level, s.cg, s.proc = Cgroup, cg, p
			t.pid, s.root = p.Pid, int32(p.Pid)
			go watchExit(p.Pid, t.exited, s.done)
			log.Debug("proc: started", "pid", t.pid, "path", a.Path, "containment", t.level.String(), "cgroup", cg.dir)
			return t, nil
		}
		// The kernel's refusal and the program's failure to execute read
		// the same (EACCES): ask the kernel which it was.
		refused := cg.home.recheck(cg)
		cg.removeAll()
		if refused == nil {
			return nil, err
		}
		if a.Containment == Cgroup {
			return nil, &UnavailableError{Level: Cgroup, Err: refused}
		}
		log.Debug("proc: the cgroup level is unavailable; tracking", "err", refused)
		sys.UseCgroupFD, sys.CgroupFD = false, 0
	}

	// Tracking: no kernel-kept membership.
	t.level = Tracking
	sys.Pdeathsig = syscall.SIGKILL
	s.marker = a.Marker
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
	s.startTracking(t.exited, t.log)
	log.Debug("proc: started", "pid", t.pid, "path", a.Path, "containment", t.level.String())
	return t, nil
}

// containment returns the cgroup for a new tree, or nil for tracking, as
// a.Containment asks.
func containment(a *Attr, log interface {
	Debug(msg string, args ...any)
}) (*runCgroup, error) {
	switch a.Containment {
	case Tracking:
		return nil, nil
	case Auto, Cgroup:
	default:
		return nil, levelError(a.Containment)
	}
	home, err := homeFor(a.CgroupParent)
	if err == nil {
		err = home.startable()
	}
	var cg *runCgroup
	if err == nil {
		cg, err = home.newRun()
	}
	if err != nil {
		if a.Containment == Cgroup {
			return nil, &UnavailableError{Level: Cgroup, Err: err}
		}
		log.Debug("proc: the cgroup level is unavailable; tracking", "err", err)
		return nil, nil
	}
	return cg, nil
}

// watchExit closes exited when the root (pid, not reaped before Wait) has
// exited, then done. It waits through a pidfd on the runtime's poller, so
// a waiting tree blocks no thread.
func watchExit(pid int, exited, done chan struct{}) {
	defer close(done)
	defer close(exited)
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			var info unix.Siginfo
			werr := rc.Read(func(fd uintptr) bool {
				info = unix.Siginfo{}
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
				return err != nil && err != unix.EAGAIN && err != unix.EINTR || info.Signo != 0
			})
			if werr == nil {
				return
			}
		}
	}
	// No pollable pidfd: block a thread instead.
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
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
	s.exitedAt = time.Now()
	close(exited)
}
