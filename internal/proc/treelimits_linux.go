//go:build linux

package proc

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// treeLimits is what Start prepares for a tree's limits and accounting
// before the root starts. A nil *treeLimits holds nothing.
type treeLimits struct {
	plan limitPlan
	cg   *runCgroup // the tree's v2 cgroup; nil at the tracking level
	v1   *v1Run     // its v1 cgroups; nil without
	// cpuBase is cpu.stat's usage_usec of a reused v2 cgroup.
	cpuBase int64
	// restricted says that the forking thread is restricted (see
	// Attr.Restrict): it can no longer write cgroupfs, so the v1 task
	// limit is lowered by Start (see startedRestricted).
	restricted bool
}

// prepareLimits plans where a's limits and figures live for a tree in cg
// (nil at the tracking level), makes the tree's v1 cgroups, and writes
// the limits, all before the root starts.
func prepareLimits(a *Attr, cg *runCgroup) (*treeLimits, error) {
	var home *cgroupHome
	if cg != nil {
		home = cg.home
	}
	v1 := v1IfOpen()
	if !a.Limits.IsZero() || a.Account {
		v1 = theV1()
	}
	plan, err := planLimits(a, home, v1)
	if err != nil {
		return nil, err
	}
	l := &treeLimits{plan: plan, cg: cg}
	if cg != nil && plan.v2 != 0 {
		if err := applyV2(cg.dir, a.Limits, plan.v2); err != nil {
			return nil, fmt.Errorf("proc: setting the tree's limits: %w", err)
		}
	}
	if plan.need != 0 {
		v1, err := v1.newRun(plan.need)
		if err != nil {
			return nil, fmt.Errorf("proc: %w", err)
		}
		if err := v1.apply(a.Limits); err != nil {
			v1.remove()
			return nil, fmt.Errorf("proc: setting the tree's limits: %w", err)
		}
		if a.tune != nil && a.tune.hooks != nil {
			v1.forked = a.tune.hooks.forked
		}
		l.v1 = v1
	}
	if cg != nil && cg.reused && plan.cpu == srcV2 && plan.any() {
		if us, err := cpuUsage(cg.dir); err == nil {
			l.cpuBase = us
		}
	}
	return l, nil
}

// replan prepares again for the tracking level, after the kernel refused
// to start the root in its cgroup.
func (l *treeLimits) replan(a *Attr) (*treeLimits, error) {
	l.remove()
	return prepareLimits(a, nil)
}

// remove removes the v1 cgroups of a tree that did not start.
func (l *treeLimits) remove() {
	if l != nil && l.v1 != nil {
		l.v1.remove()
	}
}

// startIn starts the root in cg (clone3 CLONE_INTO_CGROUP), and in the
// tree's v1 cgroups if it has some (from a thread moved into them, see
// v1Run.join). It returns the root's pid and pidfd, the one descriptor
// the tree holds while its root runs: Go's handle of the process is
// released.
func (l *treeLimits) startIn(cg *runCgroup, fork func() (*os.Process, error), restricted bool, attr *os.ProcAttr) (pid, pidfd int, err error) {
	dirfd, err := cg.openDir()
	if err != nil {
		return 0, -1, err
	}
	defer unix.Close(dirfd)
	sys := attr.Sys
	pidfd = -1
	sys.UseCgroupFD, sys.CgroupFD, sys.PidFD = true, dirfd, &pidfd
	var p *os.Process
	switch {
	case restricted && (l == nil || l.v1 == nil):
		p, err = onRetiredThread(fork)
	case l == nil || l.v1 == nil:
		p, err = fork()
	default:
		if jerr := l.v1.onLockedThread(func() { p, err = fork() }, restricted); jerr != nil {
			return 0, -1, fmt.Errorf("proc: %w", jerr)
		}
	}
	if err != nil {
		return 0, -1, err
	}
	// Go keeps a duplicate of the pidfd as its handle: the tree reaps the
	// root itself (see reapRoot).
	pid = p.Pid
	p.Release()
	return pid, pidfd, nil
}

// fork runs start, which forks the root, on the calling thread (locked to
// its goroutine), moved into the tree's v1 cgroups if it has some. The
// caller calls leave once it has reported the start (the moves back are
// not on the start path), or before if lowersOnLeave; if leave fails, the
// caller must not use the thread again.
func (l *treeLimits) fork(start func() (*os.Process, error)) (p *os.Process, err error, leave func() error) {
	if l == nil || l.v1 == nil {
		p, err = start()
		return p, err, func() error { return nil }
	}
	back, err := l.v1.join()
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err), func() error { return nil }
	}
	p, err = start()
	return p, err, func() error {
		err := back()
		if !l.restricted {
			l.v1.started()
		}
		return err
	}
}

// lowersOnLeave reports whether the forking thread's leave lowers the
// tree's task limit to its own (see v1Run.started): the caller then leaves
// before it reports the start.
func (l *treeLimits) lowersOnLeave() bool {
	return l != nil && l.v1 != nil && l.v1.tasks > 0
}

// adopt gives the started tree its accounting, and records its root (see
// roots; Wait forgets it before it reaps the root, whose pid cannot be
// reused meanwhile).
func (s *treeSys) adopt(t *Tree, l *treeLimits) {
	addRoot(s.root)
	if l == nil {
		return
	}
	s.v1 = l.v1
	s.membership.account(t, l)
}

// reapRoot reaps the root and returns how it ended, and its CPU time
// (its rusage: its own and that of the descendants it reaped).
func (s *treeSys) reapRoot() (State, time.Duration, error) {
	var info unix.Siginfo
	var ru unix.Rusage
	for {
		err := unix.Waitid(unix.P_PID, int(s.root), &info, unix.WEXITED, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return State{}, 0, fmt.Errorf("proc: wait: %w", err)
		}
		break
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if s.acct != nil {
		s.acct.noteRootRSS(ru.Maxrss * 1024) // KiB
	}
	if sig := exitSignal(&info); sig != 0 {
		return State{Code: -1, Signal: unix.SignalName(syscall.Signal(sig))}, cpu, nil
	}
	return State{Code: int(siginfoStatus(&info))}, cpu, nil
}

// finish ends the tree's accounting once the root is reaped (rootCPU its
// CPU time) and every member is gone, and no longer sampled: the last
// reading is taken, then the v1 cgroups are queued for removal.
func (t *Tree) finish(rootCPU time.Duration) {
	s := &t.sys
	if s.acct != nil {
		s.acct.release(rootCPU)
	}
	removeV1Later(s.v1, t.log)
}

// noteKill records that Kill or Signal(Kill) was called, if the root had
// not exited yet: a SIGKILL that ends the root is then not the kernel's.
func (t *Tree) noteKill() {
	if !isClosed(t.exited) {
		t.sys.killSent.Store(true)
	}
}
