//go:build linux

package proc

import (
	"bytes"
	"os"
	"strconv"
)

// ignores reads the root's ignored signals from /proc/PID/status.
func (t *Tree) ignores(s Signal) bool {
	if s == Kill {
		return false // SIGKILL cannot be ignored
	}
	sig, err := unixSignal(s)
	if err != nil {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(t.pid) + "/status")
	if err != nil {
		return false
	}
	mask, ok := sigIgn(status)
	return ok && mask&(1<<(uint(sig)-1)) != 0
}

// sigIgn returns the mask of ignored signals of a /proc/PID/status (the
// SigIgn line, in hexadecimal: bit n-1 is signal n), and whether the line
// was found and read.
func sigIgn(status []byte) (uint64, bool) {
	for line := range bytes.Lines(status) {
		v, ok := bytes.CutPrefix(line, []byte("SigIgn:"))
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		return mask, err == nil
	}
	return 0, false
}
