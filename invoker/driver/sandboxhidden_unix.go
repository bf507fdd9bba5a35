//go:build unix

package driver

import "golang.org/x/sys/unix"

// readable reports whether this process, as its effective user, may read
// p (list it, where a directory).
func readable(p string) bool {
	return unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK, unix.AT_EACCESS) == nil
}
