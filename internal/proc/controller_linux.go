//go:build linux

package proc

import (
	"errors"
	"time"
)

// A controller is one resource a tree's cgroups control: memory, pids or
// cpu, each in its own file (ctlmemory_linux.go, ctlpids_linux.go,
// ctlcpu_linux.go) with its file names, cgroup v2 and v1 alike. It says
// which of a tree's limits it holds and where (places, for planLimits),
// where its figure comes from (plan), writes its limits in a tree's
// cgroups (applyV2, applyV1), and gives the figure's readers for the
// source the plan chose (figure, events): one implementation per source,
// v2, v1 or sampled.
//
// A new limit of one of these resources is one more place of its
// controller; a new resource is a new controller file, added to
// controllers. Either has its field in Limits and Usage (limits.go).
type controller interface {
	// places are the limits the controller holds, and where; the first
	// names its v2 controller.
	places() []limitPlace
	// plan sets in p where the controller's figure comes from, and the
	// controllers that source needs.
	plan(p *limitPlan, e *planEnv)
	// applyV2 writes the controller's limits of l in the tree's v2 cgroup
	// dir, which has the controller.
	applyV2(dir string, l Limits) error
	// applyV1 writes the controller's limits of l in the tree's v1
	// cgroups r, where r has the controller's.
	applyV1(r *v1Run, l Limits) error
	// figure returns the reader of the controller's figure from the
	// source p chose, or nil when p reads none.
	figure(p *limitPlan) figure
	// events returns the reader of the controller's event counters in the
	// tree's v2 cgroup, whose controllers are v2ctl, or in its v1 cgroups
	// v1 (nil: none), or nil when neither has them.
	events(v2ctl ctlSet, v1 *v1Run) figure
	// readsV1 are the files of a tree's v1 cgroups that the controller's
	// v1 figures and events read.
	readsV1() []v1File
}

// v1File is a file of a tree's cgroup of v1 controller ctl (an index of
// v1Names).
type v1File struct {
	ctl  int
	name string
}

// controllers are the resources a tree's cgroups control.
var controllers = [numControllers]controller{memoryController{}, pidsController{}, cpuController{}}

// numControllers is the number of controllers.
const numControllers = 3

// limitPlace says where a limit on r can be held: the v2 controller, and
// the v1 controller (an index of v1Names; -1 with noV1 saying why when
// cgroup v1 cannot hold it).
type limitPlace struct {
	r    Resource
	v2   ctlSet
	v1   int
	noV1 string
}

// placeOf returns where a limit on r can be held.
func placeOf(r Resource) limitPlace {
	for _, c := range controllers {
		for _, pl := range c.places() {
			if pl.r == r {
				return pl
			}
		}
	}
	return limitPlace{v1: -1, noV1: "no controller holds it"}
}

// planEnv is what planLimits plans with: the controllers the tree's v2
// cgroup has (v2) and those of them with a peak file (peaks), the host's
// v1 hierarchies (nil: none), and whether the figures are wanted.
type planEnv struct {
	home      *cgroupHome
	v2, peaks ctlSet
	v1        *v1Host
	account   bool
}

// errNoV1 says that the host uses no cgroup v1 hierarchy.
var errNoV1 = errors.New("no cgroup v1 hierarchy is in use")

// v1ok reports whether v1 controller i can be used, and why not.
func (e *planEnv) v1ok(i int) error {
	if e.v1 == nil {
		return errNoV1
	}
	_, err := e.v1.usable(i)
	return err
}

// A figure reads, marks and ends the figures of one controller from one
// source into a tree's accounting. The accounting's state (the samples,
// the mark's descriptor) is acct's; a figure holds none.
type figure interface {
	// read adds its figures to r; a.mu is held.
	read(a *acct, r *reading)
	// mark starts a new period after r was read; a.mu is held.
	mark(a *acct, r *reading)
	// release prepares the final reading, rootCPU being the root's CPU
	// time from its rusage; a.mu is held.
	release(a *acct, rootCPU time.Duration)
}

// counters is the part of a figure that a source with nothing to mark or
// release leaves out.
type counters struct{}

func (counters) mark(*acct, *reading)         {}
func (counters) release(*acct, time.Duration) {}

// eventsIn returns the events read from the tree's v2 cgroup (onV2) where
// it has the controller (v2), else from its v1 cgroup (onV1) where it has
// one (v1), else nil.
func eventsIn(v2, v1 bool, onV2, onV1 figure) figure {
	switch {
	case v2:
		return onV2
	case v1:
		return onV1
	}
	return nil
}

// bySource returns the figure for source s: v2, v1 or sampled, nil for
// srcNone.
func bySource(s src, v2, v1, sampled figure) figure {
	switch s {
	case srcV2:
		return v2
	case srcV1:
		return v1
	case srcSample:
		return sampled
	}
	return nil
}
