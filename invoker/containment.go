package invoker

import (
	"errors"
	"strings"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// Containment is how a run's processes are held, and so what "every
// process it started is gone" rests on. WithContainment asks for a level;
// Result.Containment and ProbeContainment say which one is in force.
type Containment int

// The containment levels, best first. See the package documentation
// ("Containment") for what each guarantees.
const (
	// ContainAuto, the default, takes the best level the host allows.
	ContainAuto Containment = iota
	// ContainCgroup runs each turn in a cgroup v2 of its own (Linux,
	// with a writable cgroup: root, or a delegated one). The kernel
	// keeps the membership: no process of the run can leave, whatever it
	// does to its session, environment or process title; the sweep is a
	// single write to cgroup.kill; and a keeper process kills every run
	// of a host that dies without cleaning up (SIGKILL, OOM kill).
	ContainCgroup
	// ContainTracking finds the run's processes by process group,
	// session, parent links recorded while they exist, and a marker
	// variable in their environment (Linux without a writable cgroup).
	// It misses a process that leaves the session, clears or overwrites
	// its environment (env -i, setproctitle) and loses its parent
	// between two recordings (300 ms apart), and a sibling made with
	// clone(CLONE_PARENT); if the host is killed outright, only the CLI
	// itself dies (parent-death signal).
	ContainTracking
	// ContainJob is a Windows Job Object, terminated as a whole.
	ContainJob
	// ContainGroup is the process group plus the descendants found by
	// parent links when the run is stopped (macOS and other Unix
	// systems).
	ContainGroup
)

var toProc = map[Containment]proc.Containment{
	ContainAuto:     proc.Auto,
	ContainCgroup:   proc.Cgroup,
	ContainTracking: proc.Tracking,
	ContainJob:      proc.Job,
	ContainGroup:    proc.Group,
}

func fromProc(c proc.Containment) Containment {
	for k, v := range toProc {
		if v == c {
			return k
		}
	}
	return ContainAuto
}

// String returns the level's name: "auto", "cgroup", "tracking", "job" or
// "group".
func (c Containment) String() string {
	if p, ok := toProc[c]; ok {
		return p.String()
	}
	return "containment?"
}

// ErrContainment is returned, before anything starts, when the
// containment asked for with WithContainment cannot be had on this host.
// The error says why and how to get it: for ContainCgroup, run as root,
// or start the host in a delegated cgroup, such as
//
//	systemd-run --user -p Delegate=yes --scope ./server
//
// (the runs then live below the host's own cgroup), or name a writable
// cgroup v2 directory with WithCgroupParent.
var ErrContainment = errors.New("containment unavailable")

// ProbeContainment reports the level that Invoke would use with these
// options, without starting anything, and, when it is below what the
// options ask for or below ContainCgroup on Linux, why (an error wrapping
// ErrContainment). A server that must not run agents without kernel-kept
// containment can refuse to start:
//
//	if lvl, err := invoker.ProbeContainment(); lvl != invoker.ContainCgroup {
//		log.Fatalf("need cgroup containment: %v", err)
//	}
func ProbeContainment(opts ...Option) (Containment, error) {
	cfg := newConfig(opts)
	lvl, err := proc.Probe(toProc[cfg.containment], cfg.cgroupParent)
	if err != nil {
		err = containmentError(err)
	}
	return fromProc(lvl), err
}

// containmentError turns proc's error about a level into ErrContainment
// with a hint.
func containmentError(err error) error {
	hint := ""
	if errors.Is(err, proc.ErrUnavailable) && strings.Contains(err.Error(), "cgroup") {
		hint = " (run as root, start the host in a delegated cgroup such as `systemd-run --user -p Delegate=yes --scope CMD`, or name a writable cgroup with WithCgroupParent)"
	}
	return &containmentErr{err: err, hint: hint}
}

type containmentErr struct {
	err  error
	hint string
}

func (e *containmentErr) Error() string {
	return ErrContainment.Error() + ": " + e.err.Error() + e.hint
}

func (e *containmentErr) Unwrap() []error { return []error{ErrContainment, e.err} }
