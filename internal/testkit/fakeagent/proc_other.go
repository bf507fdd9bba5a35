//go:build !linux

package fakeagent

import (
	"os"
	"syscall"
	"time"
)

// startTime is unknown outside Linux: processes are identified by pid only.
func startTime(pid int) (uint64, bool) { return 0, false }

// alive probes p.Pid with signal 0 (Unix). It cannot tell a zombie or a
// reused pid from the recorded process, and reports false where signal 0
// is not supported (Windows).
func alive(p Proc) bool {
	proc, err := os.FindProcess(p.Pid)
	if err != nil {
		return false
	}
	defer proc.Release()
	return proc.Signal(syscall.Signal(0)) == nil
}

// withEnv needs /proc: outside Linux it finds nothing.
func withEnv(entry string) []Proc { return nil }

// awaitExit sleeps for d: outside Linux there is no pidfd to wait on.
func awaitExit(owner string, d time.Duration) { time.Sleep(d) }
