//go:build linux

package proc

import (
	"os"
	"path/filepath"
	"time"
)

// pidsController is the pids controller: Limits.Tasks (pids.max, v2 and
// v1), the task peak and the forks refused.
type pidsController struct{}

func (pidsController) places() []limitPlace { return pidsPlaces[:] }

var pidsPlaces = [...]limitPlace{{r: Tasks, v2: ctlPids, v1: v1Pids}}

// hasPidsPeak reports whether the kernel keeps pids.peak in v1 (Linux
// 6.1 and newer).
func (h *v1Host) hasPidsPeak() bool {
	if h == nil {
		return false
	}
	x, err := h.usable(v1Pids)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(x.home, pidsPeak))
	return err == nil
}

func (pidsController) plan(p *limitPlan, e *planEnv) {
	switch {
	case e.v2&ctlPids != 0 && e.peaks&ctlPids != 0:
		p.tasks, p.v2 = srcV2, p.v2|ctlPids
	case (p.need.has(v1Pids) || e.account && e.v1ok(v1Pids) == nil) && e.v1.hasPidsPeak():
		p.tasks, p.need = srcV1, p.need|1<<v1Pids
	case e.account:
		p.tasks = srcSample
	}
}

func (pidsController) applyV2(dir string, l Limits) error {
	if l.Tasks > 0 {
		return setTasks(dir, l.Tasks)
	}
	return nil
}

// applyV1 writes one task more than the limit: the forking thread is in
// the cgroup until the root has started (see v1Run.join and
// v1Run.started).
func (pidsController) applyV1(r *v1Run, l Limits) error {
	if d := r.dir[v1Pids]; d != "" && l.Tasks > 0 {
		r.tasks = l.Tasks
		return setTasks(d, l.Tasks+1)
	}
	return nil
}

// The pids files the figures read, v2 and v1 alike.
const (
	pidsPeak   = "pids.peak"
	pidsEvents = "pids.events"
)

func (pidsController) readsV1() []v1File {
	return []v1File{{v1Pids, pidsPeak}, {v1Pids, pidsEvents}}
}

func (pidsController) figure(p *limitPlan) figure {
	return bySource(p.tasks, pidsV2{}, pidsV1{}, pidsSampled{})
}

func (pidsController) events(v2ctl ctlSet, v1 *v1Run) figure {
	return eventsIn(v2ctl&ctlPids != 0, v1.has(v1Pids), pidsEventsV2{}, pidsEventsV1{})
}

// setTasks writes a pids cgroup's task limit, v2 or v1 alike.
func setTasks(dir string, n int64) error {
	return writeLimit(filepath.Join(dir, "pids.max"), n)
}

// pidsV2 is the task peak of the tree's v2 cgroup (pids.peak).
type pidsV2 struct{ counters }

func (pidsV2) read(a *acct, r *reading) {
	r.u.TasksPeak, _ = a.readInt(filepath.Join(a.v2, pidsPeak))
}

// pidsV1 is the task peak of the tree's v1 pids cgroup (pids.peak).
type pidsV1 struct{ counters }

func (pidsV1) read(a *acct, r *reading) {
	r.u.TasksPeak, _ = a.readInt(filepath.Join(a.v1.dir[v1Pids], pidsPeak))
}

// pidsSampled is the most tasks the samples saw; at least the root.
type pidsSampled struct{ counters }

func (pidsSampled) read(a *acct, r *reading) {
	r.u.TasksPeak, r.u.TasksSampled = a.sTasks, true
}

func (pidsSampled) release(a *acct, _ time.Duration) {
	a.sTasks, a.sMarkTasks = max(a.sTasks, 1), max(a.sMarkTasks, 1) // the root, at least
}

// pidsEventsV2 are the forks the tree's v2 cgroup refused (pids.events).
type pidsEventsV2 struct{ counters }

func (pidsEventsV2) read(a *acct, r *reading) { r.u.ForksRefused = forksRefused(a, a.v2) }

// pidsEventsV1 are the forks the tree's v1 pids cgroup refused
// (pids.events).
type pidsEventsV1 struct{ counters }

func (pidsEventsV1) read(a *acct, r *reading) { r.u.ForksRefused = forksRefused(a, a.v1.dir[v1Pids]) }

// forksRefused reads the forks a pids cgroup refused, v2 or v1 alike.
func forksRefused(a *acct, dir string) int64 {
	b, err := a.readSmall(filepath.Join(dir, pidsEvents))
	if err != nil {
		return 0
	}
	return keyed(b, "max")
}
