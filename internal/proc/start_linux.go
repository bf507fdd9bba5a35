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
	trackDone chan struct{} // closed when track has returned
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
	s.trackDone = make(chan struct{})
	go s.track(t.exited, t.log)
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
