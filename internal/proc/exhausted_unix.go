//go:build unix && !linux

package proc

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// exhausted is Exhausted on Unix systems other than Linux.
func exhausted(err error) error {
	var ee *ExhaustedError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	switch {
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		var lim unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
		return &ExhaustedError{Resource: "descriptors", Limits: []string{fmt.Sprintf("RLIMIT_NOFILE (ulimit -n) is %d", lim.Cur)}, Fix: "raise it with ulimit -n", Err: err}
	case errors.Is(err, unix.EAGAIN):
		var lim unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_NPROC, &lim)
		return &ExhaustedError{Resource: "processes", Limits: []string{fmt.Sprintf("RLIMIT_NPROC (ulimit -u) is %d", lim.Cur)}, Fix: "raise it with ulimit -u, or run fewer at once", Err: err}
	}
	return err
}
