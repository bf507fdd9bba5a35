//go:build linux

package proc

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// treeSys is the Linux state of a Tree.
type treeSys struct {
	done      chan struct{} // closed when the goroutine that forked has returned
	root      int32
	rootStart uint64 // the root's starttime; 0 if unknown
	subreaper bool
	host      int32
	hostPgid  int32
	waited    atomic.Bool
	prepared  atomic.Bool // counted in preparedTrees (Prepare)
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

	// membership is the tree's containment level: cgroupLevel or
	// trackingLevel, the one of the two below that holds the level's state.
	membership membership
	cgroupLevel
	trackingLevel
	// tune holds the bounds Kill and the tracker work with.
	tune tuning

	// acct is the tree's accounting and limits (nil without either),
	// v1 its cgroup v1 cgroups (nil without any).
	acct *acct
	v1   *v1Run
	// exitSignal is the signal that ended the root (0 if none), set
	// before exited is closed.
	exitSignal int32
	// killSent says that Kill or Signal(Kill) was called before the
	// root was seen to exit.
	killSent atomic.Bool
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
	var lim *treeLimits
	// abandon removes what was made for a tree that does not start (its
	// cgroup, while it has one, and its limits' cgroups) and returns err.
	abandon := func(err error) (*Tree, error) {
		if cg != nil {
			cg.removeAll()
		}
		if lim != nil {
			lim.remove()
		}
		return nil, err
	}
	if lim, err = prepareLimits(a, limitCgroupOf(cg)); err != nil {
		return abandon(err)
	}
	files, ctty, release, err := childFiles(a)
	defer release()
	if err != nil {
		return abandon(exhausted(err))
	}
	args, sys := rootArgs(a), sessionAttr(a, ctty)
	if a.SysAttr != nil {
		a.SysAttr(sys)
	}
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
			return abandon(fmt.Errorf("proc: set child subreaper: %w", err))
		}
	}
	s.subreaper = a.Subreaper
	fork, restricted := forkOf(a, args, attr)
	lim.restricted = restricted
	if cg != nil {
		pid, pidfd, err := lim.startIn(cg, fork, attr)
		if err == nil {
			t.level, s.cg, s.membership = Cgroup, cg, &s.cgroupLevel
			t.pid, s.root = pid, int32(pid)
			lim.startedRestricted()
			s.adopt(t, lim)
			go watchExit(pidfd, s, t.exited, s.done)
			log.Debug("proc: started", "pid", t.pid, "path", a.Path, "containment", t.level.String(), "cgroup", cg.dir)
			return t, nil
		}
		// The kernel's refusal and the program's failure to execute read
		// the same (EACCES): ask the kernel which it was.
		switch refused := cg.home.recheck(cg); {
		case refused == nil:
			return abandon(exhausted(err))
		case a.Containment == Cgroup:
			return abandon(&UnavailableError{Level: Cgroup, Err: refused})
		default:
			cg.removeAll()
			cg = nil
			log.Debug("proc: the cgroup level is unavailable; tracking", "err", refused)
		}
		sys.UseCgroupFD, sys.CgroupFD, sys.PidFD = false, 0, nil
		if lim, err = lim.replan(a); err != nil {
			return nil, err
		}
	}

	// Tracking: no kernel-kept membership.
	t.level, s.membership = Tracking, &s.trackingLevel
	sys.Pdeathsig = syscall.SIGKILL
	s.marker = a.Marker
	s.known = map[int32]uint64{}
	if s.marker != "" {
		// Before the fork, so that no scan can read a marked environment
		// without knowing the marker (see envResult).
		s.scanner().register(s.marker)
	}
	started := make(chan error, 1)
	var pid int
	goLocked(func() bool { return s.run(fork, lim, &pid, t.exited, started) || restricted })
	if err := <-started; err != nil {
		<-s.done
		if s.marker != "" {
			s.scanner().unregister(s.marker)
		}
		return abandon(exhausted(err))
	}
	t.pid = pid
	s.root = int32(t.pid)
	lim.startedRestricted()
	s.adopt(t, lim)
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

// watchExit closes exited when the root (s.root, not reaped before Wait)
// has exited, then done, having recorded the signal that ended it. It
// waits through the root's pidfd (pidfd, which it closes) on the
// runtime's poller, so a waiting tree blocks no thread; once the root
// has exited the tree holds no descriptor.
func watchExit(pidfd int, s *treeSys, exited, done chan struct{}) {
	defer close(done)
	defer close(exited)
	if pidfd >= 0 {
		if err := unix.SetNonblock(pidfd, true); err != nil {
			unix.Close(pidfd)
			pidfd = -1
		}
	}
	if pidfd >= 0 {
		f := os.NewFile(uintptr(pidfd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			var info unix.Siginfo
			werr := rc.Read(func(fd uintptr) bool {
				info = unix.Siginfo{}
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
				return err != nil && err != unix.EAGAIN && err != unix.EINTR || info.Signo != 0
			})
			if werr == nil && info.Signo != 0 {
				s.exitSignal = exitSignal(&info)
				return
			}
		}
	}
	// No pollable pidfd: block a thread instead.
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, int(s.root), &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	s.exitSignal = exitSignal(&info)
}

// run forks the root and waits for it to exit without reaping it. It
// runs on a locked thread of its own (see goLocked) and returns whether
// that thread must be retired.
//
// The parent-death signal is sent when the thread that forked the child
// exits, not when the host process does; a goroutine's thread may exit
// whenever the runtime likes. So the fork happens on a locked thread, and
// the thread stays locked, blocked in waitid, until the root has exited.
// WNOWAIT leaves the root a zombie, so its pid and process-group id cannot
// be reused until Wait reaps it.
//
// With cgroup v1 limits the thread first moves into the tree's v1 cgroups,
// so that the root is born there, and moves back out after the fork, once
// the start is reported (see v1Run.join); a thread that cannot move back
// is retired.
func (s *treeSys) run(fork func() (*os.Process, error), lim *treeLimits, pid *int, exited chan struct{}, started chan<- error) (retire bool) {
	defer close(s.done)
	p, err, leave := lim.fork(fork)
	if err != nil {
		started <- err
		return leave() != nil
	}
	*pid = p.Pid
	root := p.Pid
	// The tree reaps its root itself (see reapRoot): Go's handle of it
	// (a pidfd) is not needed.
	p.Release()
	if lim.lowersOnLeave() {
		// The task limit is the tree's own before Start returns.
		retire = leave() != nil
		started <- nil
	} else {
		started <- nil
		retire = leave() != nil
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, root, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	s.exitSignal = exitSignal(&info)
	s.exitedAt = time.Now()
	close(exited)
	return retire
}
