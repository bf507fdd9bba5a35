//go:build linux

package proc

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The reserve: a few descriptors the host holds (opened on the null
// device), so that Kill can still open the cgroup files it needs when the
// host has run out of descriptors. A tree holds no descriptor for them
// (see cgroupHome.newRun): a reserve shared by every tree of the host
// costs two descriptors in all, where keeping each tree's cgroup.kill and
// cgroup.events open cost two per tree.
var reserve struct {
	mu  sync.Mutex
	fds []int
}

// reserveSize is the number of descriptors kept in reserve: cgroup.kill
// and cgroup.events, which Kill may need at once.
const reserveSize = 2

// ensureReserve fills the reserve.
func ensureReserve() {
	reserve.mu.Lock()
	defer reserve.mu.Unlock()
	for len(reserve.fds) < reserveSize {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		reserve.fds = append(reserve.fds, fd)
	}
}

// withFile opens path with flags, calls f with the descriptor and closes
// it. When the host has no descriptor left (EMFILE, or ENFILE: the
// system's table is full), it frees one of the reserve for the call and
// takes it back after; calls that need the reserve run one at a time.
func withFile(path string, flags int, f func(fd int) error) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err == unix.EMFILE || err == unix.ENFILE {
		reserve.mu.Lock()
		defer reserve.mu.Unlock()
		if n := len(reserve.fds); n > 0 {
			unix.Close(reserve.fds[n-1])
			reserve.fds = reserve.fds[:n-1]
			fd, err = unix.Open(path, flags|unix.O_CLOEXEC, 0)
			// After fd is closed below: its number is free again.
			defer func() {
				if r, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
					reserve.fds = append(reserve.fds, r)
				}
			}()
		}
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd)
}
