//go:build linux

package pipe

import (
	"os"

	"golang.org/x/sys/unix"
)

// fionread is FIONREAD, which Linux names TIOCINQ.
const fionread = unix.TIOCINQ

// SetSize sets the capacity of pipe f (F_SETPIPE_SZ) and returns the
// capacity the kernel gave it; tests use it.
func SetSize(f *os.File, size int) (int, error) {
	return unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, size)
}
