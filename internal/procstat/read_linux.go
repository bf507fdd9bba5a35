//go:build linux

package procstat

import (
	"os"
	"strconv"
)

// Read reads and parses /proc/PID/stat. Its error is the read's (the
// process is gone: fs.ErrNotExist, or ESRCH) or ErrMalformed.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}
