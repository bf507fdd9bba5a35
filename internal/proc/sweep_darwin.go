//go:build darwin

package proc

import (
	"slices"
	"time"
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
	return t.killRounds(func() ([]darwinProc, error) {
		alive, err := s.snapshot()
		return slices.DeleteFunc(alive, func(p darwinProc) bool {
			return p.pid == s.root || b.spares(int(p.pid), p.start)
		}), err
	}, nil)
}
