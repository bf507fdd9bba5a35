//go:build linux

package proc

import (
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A run started in a user namespace of its own (CLONE_NEWUSER, as a
// sandboxed user's first stage is) keeps every process it starts in that
// namespace or in one nested in it: no process can leave its user
// namespace for an ancestor. So at the Tracking level the namespace is a
// mark no member can clear, unlike its environment, session or parent
// links: a daemon that double-forked, called setsid and cleared its
// environment is still found by it. A run sharing this process's user
// namespace (a plain run) has no such mark and is found as before.

// nsGetParent is NS_GET_PARENT (_IO(0xb7, 0x2)): on a user namespace's
// file, a descriptor of its parent, or EPERM where the parent is outside
// the caller's user namespace.
const nsGetParent = 0xb702

// maxUserNSWalk bounds a walk up the user namespaces: the kernel nests
// them 32 deep at most.
const maxUserNSWalk = 33

// An nsID identifies a namespace for the boot: the device and inode of its
// file.
type nsID struct{ dev, ino uint64 }

func (n nsID) zero() bool { return n == nsID{} }

// ownUserNS is this process's user namespace, zero if it cannot be read.
var ownUserNS = sync.OnceValue(func() nsID {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/user", &st) != nil {
		return nsID{}
	}
	return nsID{st.Dev, st.Ino}
})

func userNSPath(pid int32) string {
	return "/proc/" + strconv.Itoa(int(pid)) + "/ns/user"
}

// topUserNS returns the user namespace of the process pid as seen from
// this process's: its own when pid shares it, else the one nested
// directly in this process's that holds pid's (the namespace pid's run was
// started in). ok is false where pid is gone, its namespace is outside this
// process's, or it cannot be read.
func topUserNS(pid int32) (id nsID, ok bool) {
	own := ownUserNS()
	if own.zero() {
		return nsID{}, false
	}
	fd, err := unix.Open(userNSPath(pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nsID{}, false
	}
	defer func() { unix.Close(fd) }()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nsID{}, false
	}
	id = nsID{st.Dev, st.Ino}
	if id == own {
		return id, true
	}
	for range maxUserNSWalk {
		parent, err := unix.IoctlRetInt(fd, nsGetParent)
		if err != nil {
			return nsID{}, false // outside this process's namespace
		}
		unix.Close(fd)
		fd = parent
		if unix.Fstat(fd, &st) != nil {
			return nsID{}, false
		}
		if up := (nsID{st.Dev, st.Ino}); up != own {
			id = up
			continue
		}
		return id, true
	}
	return nsID{}, false
}

// runUserNS returns the user namespace the run whose root is pid was
// started in, zero where the root shares this process's (or it cannot be
// read). Read from the top (topUserNS), so a root that entered a nested
// namespace since it started still yields the run's.
func runUserNS(root int32) nsID {
	id, ok := topUserNS(root)
	if !ok || id == ownUserNS() {
		return nsID{}
	}
	return id
}

// inUserNS reports whether the process pid lives in the user namespace
// run (not zero) or in one nested in it. Most of a run's processes live
// in run itself, and most others in this process's: one stat decides for
// those; the rest walk up their parents (topUserNS).
func inUserNS(pid int32, run nsID) bool {
	var st unix.Stat_t
	if unix.Stat(userNSPath(pid), &st) != nil {
		return false
	}
	switch id := (nsID{st.Dev, st.Ino}); id {
	case run:
		return true
	case ownUserNS():
		return false
	}
	top, ok := topUserNS(pid)
	return ok && top == run
}
