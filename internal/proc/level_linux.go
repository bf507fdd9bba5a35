//go:build linux

package proc

import (
	"errors"
	"os"
	"time"
)

// membership is how a containment level knows a tree's members and ends
// them. Start picks one per tree (treeSys.membership); the Tree methods
// that act on members call it and hold no level's logic themselves. A
// level's own state is in its type; what both levels use (the root, the
// known members, the zombies left to reap, Kill's lock) is treeSys's.
//
//   - cgroupLevel: the kernel keeps the members in the tree's cgroup
//     (cgtree_linux.go, sweep_linux.go).
//   - trackingLevel: proc finds the members by parent links, process
//     group, session and marker, in scans of /proc (members_linux.go,
//     kill_linux.go, wait_linux.go, sweep_linux.go).
//
// A new level is one more type implementing membership, picked in start.
type membership interface {
	// kill ends every member and reaps what became the host's child
	// (Kill).
	kill(t *Tree) Report
	// wait reaps the root and what an earlier Kill left to reap, once the
	// root has exited, and ends the tree's accounting (Wait).
	wait(t *Tree) (State, error)
	// sweep ends the members b does not spare (SweepSince).
	sweep(t *Tree, b *Baseline) Report
	// baseline adds the live members to b, whose since is set (Baseline).
	baseline(t *Tree, b *Baseline)
	// members records the members, so that a later Kill finds those whose
	// parent links are gone by then (Snapshot, and Signal before it
	// signals).
	members(t *Tree)
	// account gives the started tree its accounting (treeSys.acct), as l
	// planned it, and has its members sampled where the plan samples a
	// figure.
	account(t *Tree, l *treeLimits)
}

// cgroupLevel is the state of a tree at the Cgroup level.
type cgroupLevel struct {
	// cg is the tree's cgroup, nil at another level.
	cg *runCgroup
	// empty says that Kill found the cgroup empty after the root had
	// exited: nothing can enter it any more. Guarded by treeSys.mu.
	empty bool
}

// trackingLevel is the state of a tree at the Tracking level.
type trackingLevel struct {
	// marker is Attr.Marker: a process whose environment holds it is a
	// member.
	marker string
	// gone says that Kill found no member left after the root had exited,
	// by a scan that read every environment it had to: no member is left
	// to start another, so a later Kill has nothing to look for. Guarded
	// by treeSys.mu.
	gone bool
	// exitedAt is when run saw the root exit; set before exited is
	// closed.
	exitedAt time.Time
	// userns is the user namespace the run was started in where it is
	// not this process's (zero otherwise): every process in it, or in a
	// namespace nested in it, is a member (userns_linux.go). Set before
	// the tracker or any caller reads it.
	userns nsID
	// usernsPin holds userns's file open until the tree is reaped: the
	// kernel gives a freed namespace's number to the next one made, and a
	// sweep would take that one's processes for the run's.
	usernsPin *os.File
}

// account is account at the Cgroup level: the figures of the tree's v2
// cgroup, and the sampler for those no controller holds (nothing else
// looks at the members).
func (c *cgroupLevel) account(t *Tree, l *treeLimits) {
	s := &t.sys
	s.acct = newAcct(l.plan, c.cg.dir, c.cg.home.ctl, l.v1.run())
	if s.acct == nil {
		return
	}
	s.acct.cpuBase = l.cpuBase
	if l.plan.sampled() {
		startSampling(t)
	}
}

// account is account at the Tracking level: no v2 cgroup; every look at
// the members is also a sample (see treeSys.memberSet).
func (*trackingLevel) account(t *Tree, l *treeLimits) {
	t.sys.acct = newAcct(l.plan, "", 0, l.v1.run())
}

func (t *Tree) kill() Report { return t.sys.membership.kill(t) }

func (t *Tree) wait() (State, error) {
	if t.sys.waited.Swap(true) {
		return State{}, errors.New("proc: Wait called twice")
	}
	<-t.exited
	return t.sys.membership.wait(t)
}

func (t *Tree) sweepSince(b Baseline) Report { return t.sys.membership.sweep(t, &b) }

func (t *Tree) baseline(b *Baseline) {
	// Before the listing: a process that starts after the listing has a
	// start time at or after since, one listed is in the set.
	b.since = bootTicks()
	t.sys.membership.baseline(t, b)
}

// snapshot records the tree's members (see membership.members).
func (t *Tree) snapshot() { t.sys.membership.members(t) }
