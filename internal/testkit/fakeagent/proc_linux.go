package fakeagent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

// stat holds the fields of /proc/<pid>/stat that the package uses.
type stat struct {
	state   byte
	ppid    int
	pgrp    int
	session int
	start   uint64 // clock ticks after boot
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (stat, bool) {
	st, err := procstat.Read(pid)
	if err != nil {
		return stat{}, false
	}
	return stat{state: st.State, ppid: st.PPID, pgrp: st.Pgrp, session: st.Session, start: st.Start}, true
}

// startTime returns the start time of pid, which with the pid identifies a
// process for its whole life.
func startTime(pid int) (uint64, bool) {
	st, ok := readStat(pid)
	return st.start, ok
}

// alive reports whether p is running: same pid and start time, and not a
// zombie.
func alive(p Proc) bool {
	st, ok := readStat(p.Pid)
	return ok && st.state != 'Z' && st.state != 'X' && st.start == p.StartTime
}

// withEnv returns the live, non-zombie processes (other than this one)
// whose initial environment holds the entry KEY=VALUE.
func withEnv(entry string) []Proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(entry)
	self := os.Getpid()
	var found []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil { // gone, or not ours to read
			continue
		}
		hit := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		if st, ok := readStat(pid); ok && st.state != 'Z' && st.state != 'X' {
			found = append(found, Proc{Pid: pid, StartTime: st.start})
		}
	}
	return found
}

// awaitExit returns when the process owner identifies (as ownerID makes
// it: "PID.STARTTIME") has exited, or after d. It waits on a pidfd, so it
// returns the moment the process exits.
func awaitExit(owner string, d time.Duration) {
	pidText, start, _ := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		time.Sleep(d)
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	}
	if err != nil {
		time.Sleep(d)
		return
	}
	defer unix.Close(fd)
	// With the pidfd open, the pid names the same process as long as it
	// runs: the start time says whether that is still the owner.
	if st, ok := readStat(pid); !ok || st.state == 'Z' || start != "" && strconv.FormatUint(st.start, 10) != start {
		return
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(d); ; {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != unix.EINTR {
			return
		}
	}
}
