//go:build linux

package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

// errNoChildren says that the kernel has no /proc/<pid>/task/<tid>/children
// (CONFIG_PROC_CHILDREN unset): walks are impossible, scans are needed.
var errNoChildren = errors.New("proc: no /proc/<pid>/task/<tid>/children")

// walk returns the tree's processes reachable by parent links from the
// root and from the known members that are still alive (same starttime):
// each one's children, read from /proc/<pid>/task/<tid>/children, and
// theirs, and so on. It reads only the tree's own processes, so its cost
// is independent of everything else the host runs, unlike a scan of
// /proc.
//
// It is what a snapshot taken to record parent links needs (see
// Tree.snapshot): every process whose parent is a member right now. What
// it cannot see are members with no parent link to one it knows: orphans
// that are not known yet. The tracker's scans find those (by session,
// group, marker), and Kill's scans find them all.
//
// Its seq is taken before the first read, as a scan's is, so that a
// snapshot applied before it, but started later, wins (see memberSet).
func (s *treeSys) walk() (*snapshot, error) {
	sn := &snapshot{seq: snapSeq.Add(1)}
	var r procReader
	seen := map[int32]bool{}
	var queue []procInfo
	visit := func(p procInfo) {
		if !seen[p.pid] && p.pid != s.host && p.pid > 1 {
			seen[p.pid] = true
			sn.procs = append(sn.procs, p)
			queue = append(queue, p)
		}
	}
	if root, err := r.stat(s.root); err == nil && root.start == s.rootStart {
		visit(root)
	} else if err != nil && !gone(err) {
		return nil, err
	}
	s.knownMu.Lock()
	starts := make([]procKey, 0, len(s.known))
	for pid, start := range s.known {
		starts = append(starts, procKey{pid, start})
	}
	s.knownMu.Unlock()
	for _, k := range starts {
		p, err := r.stat(k.pid)
		if err != nil && !gone(err) {
			return nil, err
		}
		if err == nil && p.start == k.start {
			visit(p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p.zombie() {
			continue // its children went to a reaper when it exited
		}
		kids, err := children(&r, p)
		if err != nil {
			if gone(err) {
				continue
			}
			return nil, err
		}
		for _, c := range kids {
			cp, err := r.stat(c)
			if gone(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			// A pid listed as p's child that has been reaped and
			// reused since is no child of p's.
			if cp.ppid == p.pid && cp.start >= p.start {
				visit(cp)
			}
		}
	}
	sortSnapshot(sn)
	return sn, nil
}

// children returns the pids of p's children, read from the children file
// of each of its threads, after which p is checked to be alive still with
// the same starttime: then the pids read were its children, not those of
// a process that reused its pid.
func children(r *procReader, p procInfo) ([]int32, error) {
	// Every thread, whatever p.threads said: a thread started since
	// may have forked.
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(int(p.pid)) + "/task")
	if err != nil {
		return nil, err
	}
	tids := []int32{p.pid}
	for _, e := range ents {
		if v, ok := procstat.Decimal([]byte(e.Name())); ok && int32(v) != p.pid {
			tids = append(tids, int32(v))
		}
	}
	var kids []int32
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.pid)) + "/task/" + strconv.Itoa(int(tid)) + "/children")
		if err != nil {
			if gone(err) && tid != p.pid {
				continue // the thread has exited
			}
			if errors.Is(err, os.ErrNotExist) {
				if _, serr := r.stat(p.pid); serr == nil {
					return nil, errNoChildren // the process is there, the file is not
				}
			}
			return nil, err
		}
		for f := range bytes.FieldsSeq(b) {
			if v, ok := procstat.Decimal(f); ok && v > 0 {
				kids = append(kids, int32(v))
			}
		}
	}
	if cur, err := r.stat(p.pid); err != nil {
		return nil, err
	} else if cur.start != p.start {
		return nil, os.ErrNotExist
	}
	return kids, nil
}

// record applies a walk to known: every live process in it is a member (it
// is the root, a known member or a descendant of one). Unlike memberSet it
// never forgets: a walk does not see every member. A walk older than the
// newest snapshot applied is not applied.
func (s *treeSys) record(sn *snapshot) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	if sn.seq < s.applied {
		return
	}
	s.applied = sn.seq
	for _, p := range sn.procs {
		if !p.zombie() && p.start >= s.rootStart {
			s.known[p.pid] = p.start
		}
	}
}
