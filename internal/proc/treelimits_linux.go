//go:build linux

package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// treeLimits is what Start prepares for a tree's limits and accounting
// before the root starts.
type treeLimits struct {
	plan limitPlan
	// v1 is where the tree is placed in the v1 hierarchies: its v1
	// cgroups (*v1Run), or noV1.
	v1 v1Placement
	// cpuBase is cpu.stat's usage_usec of a reused v2 cgroup.
	cpuBase int64
	// restricted says that the forking thread is restricted (see
	// Attr.Restrict): it can no longer write cgroupfs, so the v1 task
	// limit is lowered by Start (see startedRestricted).
	restricted bool
}

// limitCgroup is the tree's v2 cgroup as prepareLimits plans and writes
// its limits: the tree's *runCgroup at the Cgroup level, noCgroup at the
// Tracking level.
type limitCgroup interface {
	// limitHome returns the home of the tree's v2 cgroup (nil: none).
	limitHome() *cgroupHome
	// applyLimits writes the limits of l that plan holds in the tree's v2
	// cgroup.
	applyLimits(l Limits, plan limitPlan) error
	// cpuBase returns the CPU time the tree's v2 cgroup counted before
	// the tree (see treeLimits.cpuBase).
	cpuBase(plan limitPlan) int64
}

// limitCgroupOf returns the limitCgroup of cg, the tree's cgroup (nil at
// the Tracking level).
func limitCgroupOf(cg *runCgroup) limitCgroup {
	if cg == nil {
		return noCgroup{}
	}
	return cg
}

func (c *runCgroup) limitHome() *cgroupHome { return c.home }

func (c *runCgroup) applyLimits(l Limits, plan limitPlan) error {
	if plan.v2 == 0 {
		return nil
	}
	return applyV2(c.dir, l, plan.v2)
}

func (c *runCgroup) cpuBase(plan limitPlan) int64 {
	if !c.reused || plan.cpu != srcV2 || !plan.any() {
		return 0
	}
	us, _ := cpuUsage(filepath.Join(c.dir, cpuStat), unheld)
	return us
}

// noCgroup is the Tracking level's limitCgroup: no v2 cgroup.
type noCgroup struct{}

func (noCgroup) limitHome() *cgroupHome              { return nil }
func (noCgroup) applyLimits(Limits, limitPlan) error { return nil }
func (noCgroup) cpuBase(limitPlan) int64             { return 0 }

// prepareLimits plans where a's limits and figures live for a tree in cg
// (its v2 cgroup, or none), makes the tree's v1 cgroups, and writes the
// limits, all before the root starts.
func prepareLimits(a *Attr, cg limitCgroup) (*treeLimits, error) {
	v1 := v1IfOpen()
	if !a.Limits.IsZero() || a.Account {
		v1 = theV1()
	}
	plan, err := planLimits(a, cg.limitHome(), v1)
	if err != nil {
		return nil, err
	}
	if err := cg.applyLimits(a.Limits, plan); err != nil {
		return nil, fmt.Errorf("proc: setting the tree's limits: %w", err)
	}
	l := &treeLimits{plan: plan, v1: noV1{}, cpuBase: cg.cpuBase(plan)}
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
	return l, nil
}

// replan prepares again for the tracking level, after the kernel refused
// to start the root in its cgroup.
func (l *treeLimits) replan(a *Attr) (*treeLimits, error) {
	l.remove()
	return prepareLimits(a, noCgroup{})
}

// remove removes the v1 cgroups of a tree that did not start.
func (l *treeLimits) remove() { l.v1.remove() }

// startIn starts the root in cg (clone3 CLONE_INTO_CGROUP), and in the
// tree's v1 cgroups if it has some (from a thread moved into them, see
// v1Run.join). It returns the root's pid and pidfd, the one descriptor
// the tree holds while its root runs: Go's handle of the process is
// released.
func (l *treeLimits) startIn(cg *runCgroup, fork func() (*os.Process, error), attr *os.ProcAttr) (pid, pidfd int, err error) {
	dirfd, err := cg.openDir()
	if err != nil {
		return 0, -1, err
	}
	defer unix.Close(dirfd)
	sys := attr.Sys
	pidfd = -1
	sys.UseCgroupFD, sys.CgroupFD, sys.PidFD = true, dirfd, &pidfd
	p, err := l.v1.forkAside(fork, l.restricted)
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
	return l.v1.forkHere(start, l.restricted)
}

// lowersOnLeave reports whether the forking thread's leave lowers the
// tree's task limit to its own (see v1Run.started): the caller then leaves
// before it reports the start.
func (l *treeLimits) lowersOnLeave() bool { return l.v1.lowersOnLeave() }

// v1Placement is a tree's place in the cgroup v1 hierarchies, which the
// thread that forks its root joins for the fork: its v1 cgroups
// (*v1Run, cgroupv1_linux.go), or noV1 for a tree that has none.
type v1Placement interface {
	// run returns the tree's v1 cgroups, nil for none (its accounting's,
	// and the removal's once it is reaped).
	run() *v1Run
	// forkHere runs start on the calling thread (locked to its goroutine)
	// moved into the tree's v1 cgroups; see treeLimits.fork.
	forkHere(start func() (*os.Process, error), restricted bool) (p *os.Process, err error, leave func() error)
	// forkAside runs fork on a locked thread of its own, moved into the
	// tree's v1 cgroups for the fork, and waits for it; a restricted
	// thread is retired.
	forkAside(fork func() (*os.Process, error), restricted bool) (*os.Process, error)
	// lowersOnLeave reports whether the forking thread's leave lowers the
	// tree's task limit.
	lowersOnLeave() bool
	// started lowers the task limit to the tree's own once the forking
	// thread has left, and refills the pools the tree took from.
	started() error
	// remove removes the tree's v1 cgroups.
	remove() error
}

// noV1 is the v1Placement of a tree with no v1 cgroup.
type noV1 struct{}

func (noV1) run() *v1Run { return nil }

func (noV1) forkHere(start func() (*os.Process, error), _ bool) (*os.Process, error, func() error) {
	p, err := start()
	return p, err, func() error { return nil }
}

func (noV1) forkAside(fork func() (*os.Process, error), restricted bool) (*os.Process, error) {
	if restricted {
		return onRetiredThread(fork)
	}
	return fork()
}

func (noV1) lowersOnLeave() bool { return false }
func (noV1) started() error      { return nil }
func (noV1) remove() error       { return nil }

// adopt gives the started tree its accounting, and records its root (see
// roots; Wait forgets it before it reaps the root, whose pid cannot be
// reused meanwhile).
func (s *treeSys) adopt(t *Tree, l *treeLimits) {
	addRoot(s.root)
	s.v1 = l.v1.run()
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
// reading is taken, then the files Prepare opened (held, those the
// caller let go of, and the accounting's) are queued to be closed, and
// the v1 cgroups for removal.
func (t *Tree) finish(rootCPU time.Duration, held []int) {
	s := &t.sys
	if s.acct != nil {
		held = s.acct.release(rootCPU, held)
	}
	// The tree stays counted as prepared until its files are closed; the
	// count is claimed here, once (prepare may claim it back where it set
	// it after Wait began).
	closeLater(held, s.prepared.Swap(false), t.log)
	removeV1Later(s.v1, t.log)
}

// noteKill records that Kill or Signal(Kill) was called, if the root had
// not exited yet: a SIGKILL that ends the root is then not the kernel's.
func (t *Tree) noteKill() {
	if !isClosed(t.exited) {
		t.sys.killSent.Store(true)
	}
}
