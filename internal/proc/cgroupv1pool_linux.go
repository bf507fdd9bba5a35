//go:build linux

package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The trees' cgroup v1 cgroups are made ahead, off the start path: a mkdir
// in a v1 memory hierarchy is the largest single cost of starting an
// accounted tree on a host whose controllers are v1 (the kernel sets up a
// memory cgroup's per-CPU state as it makes it). Each hierarchy's home
// keeps up to v1PoolSize empty cgroups, made by a goroutine that a tree
// starts once its root has started (so that the mkdirs do not compete with
// that start); a tree takes one instead of making its own, and makes its
// own only when none is ready (the first tree, or many at once). The
// goroutine also looks up, in each cgroup it makes, the files the tree's
// figures will read (see lookUp), which takes that cost off the path of
// Wait's final reading.
//
// A cgroup is used by one tree only, never reused: a used v1 cgroup's
// figures cannot all be reset (pids.peak is read-only; memory a tree
// charged, its page cache, stays charged to the cgroup after the tree has
// gone), so a tree's figures start at zero because its cgroup is new. The
// kept cgroups are removed once no tree has taken one for poolIdle; a
// keeper removes those of a host that died (see keeperScript).

// v1PoolSize bounds the cgroups kept ready in each v1 hierarchy.
const v1PoolSize = 4

// A v1Pool holds a hierarchy's cgroups made ahead.
type v1Pool struct {
	mu    sync.Mutex
	ready []string // empty cgroups no tree has taken
	// filling says that a goroutine is making cgroups; drained that the
	// kept ones were removed since (it removes what it makes then).
	filling, drained bool
	idle             *time.Timer // removes the kept cgroups (see drain)
}

// take returns an empty cgroup for a tree, a kept one if there is one,
// else one it makes (named by name).
func (x *v1Hier) take(name func() string) (string, error) {
	p := &x.pool
	p.mu.Lock()
	var dir string
	if n := len(p.ready); n > 0 {
		dir, p.ready = p.ready[n-1], p.ready[:n-1]
	}
	p.drained = false
	if p.idle == nil {
		p.idle = time.AfterFunc(poolIdle, x.drain)
	} else {
		p.idle.Reset(poolIdle)
	}
	p.mu.Unlock()
	if dir != "" {
		return dir, nil
	}
	dir = filepath.Join(x.home, name())
	return dir, os.Mkdir(dir, 0o755)
}

// refill makes, in a goroutine of its own, the cgroups that the pool
// lacks, unless one is already at it.
func (x *v1Hier) refill(name func() string) {
	p := &x.pool
	p.mu.Lock()
	start := !p.filling && !p.drained && len(p.ready) < v1PoolSize
	p.filling = p.filling || start
	p.mu.Unlock()
	if start {
		go x.fill(name)
	}
}

// fill makes cgroups until the pool is full or drained.
func (x *v1Hier) fill(name func() string) {
	p := &x.pool
	for {
		dir := filepath.Join(x.home, name())
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			lookUp(dir, x.reads)
		}
		p.mu.Lock()
		if err != nil || p.drained {
			p.filling = false
			p.mu.Unlock()
			if err == nil {
				unix.Rmdir(dir)
			}
			return
		}
		p.ready = append(p.ready, dir)
		if len(p.ready) >= v1PoolSize {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// lookUp looks up the files names in the new cgroup dir. The kernel makes
// a cgroup file's inode at its first lookup, half as much again as the
// open and read that follow (measured on Linux 6.18: the five v1 files of
// an accounted tree read in 85 µs in a new cgroup, 60 µs once looked up):
// done here, a tree that takes the cgroup reads its final figures, on
// Wait's path, from files already looked up.
func lookUp(dir string, names []string) {
	var st unix.Stat_t
	for _, n := range names {
		unix.Stat(filepath.Join(dir, n), &st)
	}
}

// readsIn returns the files of a tree's cgroup in x that the controllers'
// figures read (see controller.readsV1).
func (h *v1Host) readsIn(x *v1Hier) []string {
	var names []string
	for _, c := range controllers {
		for _, f := range c.readsV1() {
			if h.hier[f.ctl] == x {
				names = append(names, f.name)
			}
		}
	}
	return names
}

// drain removes the kept cgroups.
func (x *v1Hier) drain() {
	p := &x.pool
	p.mu.Lock()
	ready := p.ready
	p.ready, p.drained = nil, true
	p.mu.Unlock()
	for _, d := range ready {
		unix.Rmdir(d)
	}
}

// runName returns a new name for a tree's cgroup in the v1 homes.
func (h *v1Host) runName() string {
	return "r" + strconv.FormatUint(h.seq.Add(1), 10)
}
