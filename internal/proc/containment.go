package proc

import (
	"errors"
	"fmt"
	"runtime"
)

// Containment is how a Tree holds its members: what decides which
// processes are the tree's, and so what Kill can reach.
type Containment int

// The containment levels. Auto is only ever asked for; a started Tree
// reports the level it got.
const (
	// Auto asks for the best level the host allows: Cgroup where a
	// writable cgroup v2 directory exists, else Tracking (Linux), Job
	// (Windows) or Group (other systems).
	Auto Containment = iota
	// Cgroup runs the tree in a cgroup v2 of its own (Linux). The root is
	// started inside it (clone3 CLONE_INTO_CGROUP), every process it
	// starts is born there, and nothing can leave it without privileges
	// over the cgroup tree, whatever it does to its session, environment
	// or process title. Kill is one write to cgroup.kill, and "all gone"
	// is the kernel's populated flag. A keeper process kills the trees
	// of a host that dies without cleaning up (SIGKILL, OOM).
	Cgroup
	// Tracking finds members by process group, session, parent links
	// recorded while they exist, and a marker variable in their
	// environment (Linux fallback). It cannot see a process that leaves
	// the session, clears or overwrites its environment (setproctitle)
	// and loses its parent between two recordings, nor a sibling made
	// with clone(CLONE_PARENT); a host killed outright takes down only
	// the root (parent-death signal).
	Tracking
	// Job is a Windows Job Object that kills its processes when closed.
	Job
	// Group is the process group plus the descendants found by parent
	// links when Kill runs (macOS and other Unix systems).
	Group
)

// String returns the level's name: "auto", "cgroup", "tracking", "job" or
// "group".
func (c Containment) String() string {
	switch c {
	case Auto:
		return "auto"
	case Cgroup:
		return "cgroup"
	case Tracking:
		return "tracking"
	case Job:
		return "job"
	case Group:
		return "group"
	}
	return "containment?"
}

// ErrUnavailable is returned by Start when the level Attr.Containment asks
// for cannot be had; the error says why (for Cgroup: no cgroup v2 mount,
// no permission to make a cgroup, no cgroup.kill in the kernel).
var ErrUnavailable = errors.New("proc: containment level unavailable")

// Probe reports the level Start would give a tree with the same
// containment and cgroup parent, without starting anything, and, when
// that is not Cgroup, why not (an error wrapping ErrUnavailable; nil where
// cgroups do not exist). On Linux a successful probe prepares the
// cgroups and keeper that later Starts use.
func Probe(want Containment, cgroupParent string) (Containment, error) {
	return probe(want, cgroupParent)
}

// levelError says that a level cannot be had on this system.
func levelError(c Containment) error {
	if c == Cgroup {
		return fmt.Errorf("%w: cgroups exist only on Linux, not on %s", ErrUnavailable, runtime.GOOS)
	}
	return fmt.Errorf("%w: %v is not available on %s", ErrUnavailable, c, runtime.GOOS)
}
