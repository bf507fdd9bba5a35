package driver

import (
	"os"
	"syscall"
	"time"
)

// ctimeOf returns when fi's inode last changed (its status change time),
// which no caller can set; the zero time where fi is nil.
func ctimeOf(fi os.FileInfo) time.Time {
	if fi == nil {
		return time.Time{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}
	}
	return time.Unix(st.Ctim.Unix())
}
