//go:build linux

package proc

import (
	"log/slog"
	"maps"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/ahead"
)

// TestPrepareHeldUntilWait: Prepare opens the files the end of a tree
// reads (cgroup.events at the Cgroup level, the accounting's files) once,
// without counting a reading; Kill and Wait read through them, and Wait
// lets go of them, with the final figures read as without Prepare; they
// are closed with the batch of removals that follows, or by a settle.
func TestPrepareHeldUntilWait(t *testing.T) {
	tests := []struct {
		name    string
		prepare int // calls of Prepare
	}{
		{name: "unprepared", prepare: 0},
		{name: "prepared", prepare: 1},
		{name: "prepared twice", prepare: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			r := startRun(t, Attr{Account: true}, "hang")
			s := &r.tree.sys
			a := s.acct
			if a == nil {
				t.Fatal("no accounting for an accounted tree")
			}
			a.mu.Lock()
			reads := a.reads
			a.mu.Unlock()
			counted := preparedTrees.Load()
			var held map[string]int
			for range tt.prepare {
				r.tree.Prepare()
				a.mu.Lock()
				if held == nil {
					held = maps.Clone(a.held)
				} else if !maps.Equal(held, a.held) {
					t.Errorf("a second Prepare held %v, want the first one's %v", a.held, held)
				}
				a.mu.Unlock()
			}
			a.mu.Lock()
			if a.reads != reads {
				t.Errorf("Prepare counted %d readings, want none", a.reads-reads)
			}
			a.mu.Unlock()
			cg := s.cgroupLevel.cg
			s.mu.Lock()
			events := cg != nil && cg.eventsHeld
			s.mu.Unlock()
			if want := tt.prepare > 0 && r.tree.Containment() == Cgroup; events != want {
				t.Errorf("cgroup.events held = %v, want %v", events, want)
			}
			if rep := r.tree.Kill(); len(rep.Survivors) > 0 {
				t.Fatalf("Kill() survivors %v", rep.Survivors)
			}
			r.wait()
			ahead.SettleAll()
			if got := preparedTrees.Load(); got != counted {
				t.Errorf("after Wait, %d trees counted as prepared, want %d as before", got, counted)
			}
			u := r.tree.Usage()
			if u.CPU <= 0 || u.TasksPeak < 1 {
				t.Errorf("Usage() after Wait = %+v, want the CPU time and the task peak", u)
			}
			if sampled := u.CPUSampled && u.MemorySampled && u.TasksSampled; tt.prepare > 0 && !sampled && len(held) == 0 {
				t.Errorf("Prepare held no file, want those of the figures read from cgroups (Usage %+v)", u)
			}
			a.mu.Lock()
			if a.held != nil {
				t.Errorf("after Wait, held %v, want none", a.held)
			}
			a.mu.Unlock()
			if cg != nil && cg.eventsHeld {
				t.Error("after Wait, cgroup.events is still held")
			}
			for path, fd := range held {
				if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && link == path {
					t.Errorf("after Wait and a settle, descriptor %d still open on %s", fd, path)
				}
			}
		})
	}
}

// TestPrepareBounded: beyond maxPrepared trees holding their files, Prepare
// opens nothing, and the tree's end reads as without it.
func TestPrepareBounded(t *testing.T) {
	noLeaks(t)
	preparedTrees.Add(maxPrepared)
	defer preparedTrees.Add(-maxPrepared)
	r := startRun(t, Attr{Account: true}, "hang")
	r.tree.Prepare()
	a := r.tree.sys.acct
	a.mu.Lock()
	held := len(a.held)
	a.mu.Unlock()
	if cg := r.tree.sys.cgroupLevel.cg; held > 0 || cg != nil && cg.eventsHeld {
		t.Errorf("Prepare beyond the bound held %d files (cgroup.events: %v), want none", held, cg != nil && cg.eventsHeld)
	}
	if rep := r.tree.Kill(); len(rep.Survivors) > 0 {
		t.Fatalf("Kill() survivors %v", rep.Survivors)
	}
	r.wait()
	ahead.SettleAll()
	if got := preparedTrees.Load(); got != maxPrepared {
		t.Errorf("after Wait, %d trees counted as prepared, want the %d set", got, maxPrepared)
	}
	if u := r.tree.Usage(); u.CPU <= 0 || u.TasksPeak < 1 {
		t.Errorf("Usage() after Wait = %+v, want the CPU time and the task peak", u)
	}
}

// TestCloseLater: the descriptors of a reaped tree's files stay open, and
// the tree counted among the prepared, until the batch closes them; then
// both go at once, the count only after the close, so that the bound on
// descriptors Prepare holds (maxPrepared) is never exceeded.
func TestCloseLater(t *testing.T) {
	ahead.SettleAll()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	var before [2]unix.Stat_t
	for i, fd := range p {
		if err := unix.Fstat(fd, &before[i]); err != nil {
			t.Fatal(err)
		}
	}
	counted := preparedTrees.Load()
	preparedTrees.Add(1) // as Prepare counts a tree
	closeLater(p[:], true, slog.New(slog.DiscardHandler))
	for i, fd := range p {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Ino != before[i].Ino {
			t.Errorf("descriptor %d closed before the batch: %v", fd, err)
		}
	}
	if got := preparedTrees.Load(); got != counted+1 {
		t.Errorf("before the batch, %d trees counted as prepared, want %d", got, counted+1)
	}
	ahead.SettleAll() // the batch, at once
	for i, fd := range p {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Ino == before[i].Ino {
			t.Errorf("descriptor %d still open after the batch", fd)
		}
	}
	if got := preparedTrees.Load(); got != counted {
		t.Errorf("after the batch, %d trees counted as prepared, want %d", got, counted)
	}
}

// TestPrepareArmsRemovals: Prepare schedules the batch of removals, so
// that Wait queues the tree's files without arming a timer on its return,
// and the files are closed by a flush after Wait.
func TestPrepareArmsRemovals(t *testing.T) {
	noLeaks(t)
	ahead.SettleAll()
	pending := func() bool {
		removals.mu.Lock()
		defer removals.mu.Unlock()
		return removals.pending
	}
	r := startRun(t, Attr{Account: true}, "hang")
	counted := preparedTrees.Load()
	r.tree.Prepare()
	if !pending() {
		t.Error("after Prepare, no flush of the removals scheduled")
	}
	if got := preparedTrees.Load(); got != counted+1 {
		t.Fatalf("after Prepare, %d trees counted as prepared, want %d", got, counted+1)
	}
	a := r.tree.sys.acct
	a.mu.Lock()
	held := maps.Clone(a.held)
	a.mu.Unlock()
	if rep := r.tree.Kill(); len(rep.Survivors) > 0 {
		t.Fatalf("Kill() survivors %v", rep.Survivors)
	}
	r.wait()
	if !pending() && preparedTrees.Load() != counted {
		// Not scheduled, and not flushed already by the one armed
		// before (removeDelay may pass on a loaded host).
		t.Error("after Wait, no flush scheduled for the tree's files")
	}
	ahead.SettleAll()
	if got := preparedTrees.Load(); got != counted {
		t.Errorf("after Wait and a flush, %d trees counted as prepared, want %d", got, counted)
	}
	for path, fd := range held {
		if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && link == path {
			t.Errorf("after Wait and a flush, descriptor %d still open on %s", fd, path)
		}
	}
}
