//go:build unix

package mcpadapter

import (
	"io/fs"
	"syscall"
)

// inode returns the inode number of fi's file, so that a token file
// replaced by a rename is noticed even with the same time and size.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
