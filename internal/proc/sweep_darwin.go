//go:build darwin

package proc

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Baseline and SweepSince on macOS, best effort: the members are the
// root's process group and the descendants found by parent links (see
// treeSys.snapshot), killed by pid after a start-time check, with a gap
// between the two in which the pid could be reused.

func (t *Tree) baseline(b *Baseline) {
	// Start times are wall-clock microseconds (P_starttime).
	b.since = uint64(time.Now().UnixMicro())
	alive, err := t.sys.snapshot()
	if err != nil {
		t.sys.mu.Lock()
		for pid, start := range t.sys.known {
			b.members = append(b.members, member{pid: int(pid), start: start})
		}
		t.sys.mu.Unlock()
		return
	}
	for _, p := range alive {
		b.members = append(b.members, member{pid: int(p.pid), start: p.start})
	}
}

func (t *Tree) sweepSince(b Baseline) Report {
	s := &t.sys
	begin := time.Now()
	deadline := begin.Add(killTimeout)
	var rep Report
	for {
		alive, err := s.snapshot()
		if err != nil {
			break
		}
		alive = slices.DeleteFunc(alive, func(p darwinProc) bool {
			return p.pid == s.root || b.spares(int(p.pid), p.start)
		})
		if len(alive) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			for _, p := range alive {
				rep.Survivors = append(rep.Survivors, int(p.pid))
			}
			break
		}
		for _, p := range alive {
			if st, ok := startOf(p.pid); ok && st == p.start {
				unix.Kill(int(p.pid), unix.SIGKILL)
				if !slices.Contains(rep.Killed, int(p.pid)) {
					rep.Killed = append(rep.Killed, int(p.pid))
				}
			}
		}
		awaitExit(alive, deadline)
	}
	rep.Elapsed = time.Since(begin)
	return rep
}
