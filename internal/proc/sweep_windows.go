//go:build windows

package proc

import (
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Baseline and SweepSince on Windows: the members are the processes of
// the tree's Job Object, each identified by its pid and creation time, and
// each process swept is terminated through a handle opened and then
// checked to name a process of the job (so a pid reused meanwhile is
// never hit), and waited for through that handle.

var procIsProcessInJob = windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")

// inJob reports whether the process of h is in job.
func inJob(h, job windows.Handle) bool {
	if procIsProcessInJob.Find() != nil {
		return false
	}
	var in int32
	r, _, _ := procIsProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in)))
	return r != 0 && in != 0
}

// creation returns the creation time of the process of h.
func creation(h windows.Handle) (uint64, bool) {
	var c, e, k, u windows.Filetime
	if err := windows.GetProcessTimes(h, &c, &e, &k, &u); err != nil {
		return 0, false
	}
	return uint64(c.HighDateTime)<<32 | uint64(c.LowDateTime), true
}

func (t *Tree) baseline(b *Baseline) {
	var now windows.Filetime
	windows.GetSystemTimeAsFileTime(&now)
	b.since = uint64(now.HighDateTime)<<32 | uint64(now.LowDateTime)
	pids, _ := t.jobPids()
	for _, pid := range pids {
		h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
		if err != nil {
			continue
		}
		if start, ok := creation(h); ok {
			b.members = append(b.members, member{pid: pid, start: start})
		}
		windows.CloseHandle(h)
	}
}

func (t *Tree) sweepSince(b Baseline) Report {
	begin := time.Now()
	deadline := begin.Add(killTimeout)
	var rep Report
	seen := map[member]bool{}
	for {
		pids, err := t.jobPids()
		if err != nil {
			break
		}
		var held []windows.Handle
		var heldPids []int
		for _, pid := range pids {
			if pid == t.pid {
				continue
			}
			h, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
			if err != nil {
				continue
			}
			start, ok := creation(h)
			if !ok || b.spares(pid, start) || seen[member{pid: pid, start: start}] || !inJob(h, t.sys.job) {
				windows.CloseHandle(h)
				continue
			}
			seen[member{pid: pid, start: start}] = true
			if err := windows.TerminateProcess(h, killedExitCode); err != nil {
				rep.Survivors = append(rep.Survivors, pid)
				windows.CloseHandle(h)
				continue
			}
			rep.Killed = append(rep.Killed, pid)
			held = append(held, h)
			heldPids = append(heldPids, pid)
		}
		if len(held) == 0 {
			break
		}
		late := false
		for i, h := range held {
			wait := max(time.Until(deadline), 0)
			if ev, err := windows.WaitForSingleObject(h, uint32(wait/time.Millisecond)); err != nil || ev != windows.WAIT_OBJECT_0 {
				rep.Survivors = append(rep.Survivors, heldPids[i])
				late = true
			}
			windows.CloseHandle(h)
		}
		if late {
			break
		}
	}
	rep.Elapsed = time.Since(begin)
	return rep
}
