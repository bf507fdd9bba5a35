//go:build !linux

package procstat

import "errors"

// Read reports errors.ErrUnsupported: only Linux has /proc/PID/stat.
func Read(pid int) (Stat, error) {
	return Stat{}, errors.ErrUnsupported
}
