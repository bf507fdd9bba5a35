//go:build unix

package pipe

import (
	"os"

	"golang.org/x/sys/unix"
)

// Buffered returns how many bytes wait to be read in the pipe or
// terminal f (FIONREAD), without reading them.
func Buffered(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), fionread) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
