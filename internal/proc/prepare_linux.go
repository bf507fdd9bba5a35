//go:build linux

package proc

import (
	"errors"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// What follows the root's exit reads a few cgroup files: Kill reads
// cgroup.events (at the Cgroup level), Wait's final reading the figures'
// files. Opening a cgroup file costs four to five times the read that
// follows it (measured: 8-10 µs for the open, 1.7 µs for a pread of an
// open v1 file), and a cancel waits for every one of them. Prepare opens
// them while the ladder waits for the CLI to exit, which takes far longer
// (milliseconds), so that the reads after the exit are preads alone. The
// descriptors are held from the ladder's first step until Wait, which
// hands them to the batch of removals that follows (closeLater): closing
// them costs about what reading them does (measured: 12 µs for six v1
// files, reads and closes alike), which Wait's return need not wait for.
// A tree that is not being stopped holds none. At most maxPrepared trees hold
// them at once, so that a mass cancel (a thousand runs stopped together)
// adds a bounded number of descriptors: the trees beyond it open their
// files after the exit, as without Prepare.

// maxPrepared bounds the trees whose files Prepare holds at once: each
// holds up to six (cgroup.events and five figures' files on a hybrid
// host).
const maxPrepared = 128

// preparedTrees counts the trees whose files Prepare holds.
var preparedTrees atomic.Int32

func (t *Tree) prepare() {
	s := &t.sys
	if s.waited.Load() || s.prepared.Load() {
		return
	}
	if preparedTrees.Add(1) > maxPrepared {
		preparedTrees.Add(-1)
		return
	}
	if s.prepared.Swap(true) {
		preparedTrees.Add(-1) // another call got here first
		return
	}
	// Wait may have begun since the check above, and its finish read
	// prepared before the Swap: then nothing would take the tree off the
	// count. Wait is marked before finish claims the count (Swap(false)),
	// so one of the two sees the other and takes it off, once.
	if s.waited.Load() {
		if s.prepared.Swap(false) {
			preparedTrees.Add(-1)
		}
		return
	}
	armRemovals()
	if c := s.cgroupLevel.cg; c != nil {
		s.mu.Lock()
		if !s.waited.Load() {
			c.holdEvents()
		}
		s.mu.Unlock()
	}
	if a := s.acct; a != nil {
		a.prepare()
	}
}

// holdEvents opens cgroup.events for populated, unless it is open
// already; treeSys.mu is held. Without a descriptor to spare it opens
// nothing: populated opens the file at each read as before.
func (c *runCgroup) holdEvents() {
	if c.eventsHeld {
		return
	}
	fd, err := unix.Open(filepath.Join(c.dir, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	c.eventsFd, c.eventsHeld = fd, true
}

// releaseEvents lets go of what holdEvents opened, appending its
// descriptor to fds for the caller to close; treeSys.mu is held.
func (c *runCgroup) releaseEvents(fds []int) []int {
	if c.eventsHeld {
		fds = append(fds, c.eventsFd)
		c.eventsFd, c.eventsHeld = -1, false
	}
	return fds
}

// prepare opens the files of the figures, for the final reading: it
// walks the figures' reads with holding set, which opens each file and
// reads none (the figures take the error for a file they could not read,
// and their figures are dropped), and is not counted among the tree's
// readings (acct.reads). It does nothing once the final reading is
// taken.
func (a *acct) prepare() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final != nil || a.held != nil {
		return
	}
	a.held = map[string]int{}
	a.holding = true
	r := reading{memSinceMark: -1}
	for _, f := range a.figs {
		f.read(a, &r)
	}
	a.holding = false
}

// errHeld is what a figure's read gets while prepare opens its file.
var errHeld = errors.New("proc: file opened ahead, not read")

// fd returns the descriptor a figure reads path through: the one prepare
// opened, or unheld. While prepare walks the reads it opens path to keep
// instead, if it can, and returns errHeld: the figure reads nothing. a.mu
// is held.
func (a *acct) fd(path string) (int, error) {
	fd, ok := a.held[path]
	if a.holding {
		if !ok {
			if fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				a.held[path] = fd
			}
		}
		return unheld, errHeld
	}
	if !ok {
		return unheld, nil
	}
	return fd, nil
}

// readSmall is readSmall for the figures, through fd.
func (a *acct) readSmall(path string) ([]byte, error) {
	held, err := a.fd(path)
	if err != nil {
		return nil, err
	}
	return readSmall(path, held)
}

// readInt is readInt for the figures, through fd.
func (a *acct) readInt(path string) (int64, error) {
	held, err := a.fd(path)
	if err != nil {
		return 0, err
	}
	return readInt(path, held)
}

// dropHeld lets go of the files prepare opened, appending their
// descriptors to fds for the caller to close; a.mu is held.
func (a *acct) dropHeld(fds []int) []int {
	for _, fd := range a.held {
		fds = append(fds, fd)
	}
	a.held = nil
	return fds
}
