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

// ErrUnavailable is matched by the error of Start when the level
// Attr.Containment asks for cannot be had, and of Probe when the level is
// not the best one; the error is an *UnavailableError that says why.
var ErrUnavailable = errors.New("proc: containment level unavailable")

// An UnavailableError says why a containment level cannot be had. It
// matches ErrUnavailable, and unwraps to its reason.
type UnavailableError struct {
	// Level is the level that cannot be had.
	Level Containment
	// Err is why, in words that stand on their own ("making a cgroup in
	// /sys/fs/cgroup: permission denied"); for Cgroup (Linux) it names
	// the cgroup concerned. It matches ErrRefused when the kernel refused
	// to start a process in a cgroup the host made.
	Err error
}

// Error reads "proc: the cgroup level is unavailable: " and the reason.
func (e *UnavailableError) Error() string {
	return "proc: the " + e.Level.String() + " level is unavailable: " + e.Err.Error()
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the reason.
func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrRefused is matched by the reason of an *UnavailableError when the
// host may make cgroups under the parent but the kernel refuses to start
// processes in them (Linux). The reason also matches the kernel's error:
// most often fs.ErrPermission: with cgroup v2, a process may start another
// in a cgroup other than its own only if it may write cgroup.procs of the
// cgroup that holds both, so a host given a cgroup it does not run inside
// is refused.
var ErrRefused = errors.New("the kernel refuses to start processes in the cgroup")

// Probe reports the level Start would give a tree with the same
// containment and cgroup parent, without starting the tree, and, when
// that is not Cgroup, why not (an *UnavailableError; nil where cgroups do
// not exist). On Linux it asks the kernel the way Start will: once per
// cgroup parent, a process is started in one of the host's cgroups there
// and fails at once, executing nothing. A successful probe prepares the
// cgroups and keeper that later Starts use.
func Probe(want Containment, cgroupParent string) (Containment, error) {
	return probe(want, cgroupParent)
}

// levelError says that a level cannot be had on this system.
func levelError(c Containment) error {
	if c == Cgroup {
		return &UnavailableError{Level: c, Err: fmt.Errorf("cgroups exist only on Linux, not on %s", runtime.GOOS)}
	}
	return &UnavailableError{Level: c, Err: fmt.Errorf("it does not exist on %s", runtime.GOOS)}
}
