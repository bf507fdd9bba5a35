//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// memoryController is the memory controller: Limits.MemoryMax (v2
// memory.max, v1 memory.limit_in_bytes), Limits.MemoryHigh (v2 only), the
// memory peak and the OOM kills.
type memoryController struct{}

func (memoryController) places() []limitPlace { return memoryPlaces[:] }

var memoryPlaces = [...]limitPlace{
	{r: Memory, v2: ctlMemory, v1: v1Memory},
	{r: MemoryHigh, v2: ctlMemory, v1: -1, noV1: "cgroup v1 has no throttle level (memory.soft_limit_in_bytes only orders reclaim when the whole system runs short)"},
}

func (memoryController) plan(p *limitPlan, e *planEnv) {
	switch {
	case e.v2&ctlMemory != 0 && e.peaks&ctlMemory != 0:
		p.mem, p.v2 = srcV2, p.v2|ctlMemory
	case p.need.has(v1Memory) || e.account && e.v1ok(v1Memory) == nil:
		p.mem, p.need = srcV1, p.need|1<<v1Memory
	case e.account:
		p.mem = srcSample
	}
}

func (memoryController) applyV2(dir string, l Limits) error {
	if l.MemoryMax > 0 {
		if err := writeLimit(filepath.Join(dir, "memory.max"), l.MemoryMax); err != nil {
			return err
		}
		// A hard maximum: no swapping past it. Without swap
		// accounting there is no file and no swap to bound.
		if err := writeFile(filepath.Join(dir, "memory.swap.max"), "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if l.MemoryHigh > 0 {
		if err := writeLimit(filepath.Join(dir, "memory.high"), l.MemoryHigh); err != nil {
			return err
		}
	}
	return nil
}

func (memoryController) applyV1(r *v1Run, l Limits) error {
	if d := r.dir[v1Memory]; d != "" && l.MemoryMax > 0 {
		return setV1Memory(d, l.MemoryMax)
	}
	return nil
}

// The v1 memory files the figures read.
const (
	v1MemoryPeak = "memory.max_usage_in_bytes"
	v1MemoryOOM  = "memory.oom_control"
)

func (memoryController) readsV1() []v1File {
	return []v1File{{v1Memory, v1MemoryPeak}, {v1Memory, v1MemoryOOM}}
}

func (memoryController) figure(p *limitPlan) figure {
	return bySource(p.mem, memoryV2{}, memoryV1{}, memorySampled{})
}

func (memoryController) events(v2ctl ctlSet, v1 *v1Run) figure {
	return eventsIn(v2ctl&ctlMemory != 0, v1.has(v1Memory), memoryEventsV2{}, memoryEventsV1{})
}

// memoryV2 is the memory peak of the tree's v2 cgroup: memory.peak, and
// the peak since the mark through the mark's open memory.peak.
type memoryV2 struct{}

func (memoryV2) read(a *acct, r *reading) {
	r.u.MemoryPeak, _ = a.readInt(filepath.Join(a.v2, "memory.peak"))
	if a.markFd >= 0 {
		var buf [32]byte
		if n, err := unix.Pread(a.markFd, buf[:], 0); err == nil {
			if v, err := parseInt(buf[:n]); err == nil {
				r.memSinceMark = v
			}
		}
	}
}

func (memoryV2) mark(a *acct, _ *reading) {
	if a.markFd >= 0 {
		unix.Close(a.markFd)
		a.markFd = -1
	}
	// Writing memory.peak resets the peak seen through this open
	// file to the current usage (Linux 6.12); an older kernel
	// refuses the open for writing or the write.
	fd, err := unix.Open(filepath.Join(a.v2, "memory.peak"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		if _, err := unix.Write(fd, []byte("reset\n")); err != nil {
			unix.Close(fd)
		} else {
			a.markFd = fd
		}
	}
}

func (memoryV2) release(*acct, time.Duration) {}

// memoryV1 is the memory peak of the tree's v1 memory cgroup:
// memory.max_usage_in_bytes, which a mark resets for the whole cgroup.
type memoryV1 struct{}

func (memoryV1) read(a *acct, r *reading) {
	peak, _ := a.readInt(filepath.Join(a.v1.dir[v1Memory], v1MemoryPeak))
	r.u.MemoryPeak = max(peak, a.v1.peakBefore.Load())
	if a.markV1 {
		r.memSinceMark = peak
	}
}

func (memoryV1) mark(a *acct, r *reading) {
	// Writing 0 resets the peak to the current usage, for the whole
	// cgroup: the run's peak so far is kept aside.
	p := a.v1.peakBefore.Load()
	if r.u.MemoryPeak > p {
		a.v1.peakBefore.Store(r.u.MemoryPeak)
	}
	a.markV1 = writeFile(filepath.Join(a.v1.dir[v1Memory], v1MemoryPeak), "0") == nil
}

func (memoryV1) release(*acct, time.Duration) {}

// memorySampled is the most resident memory the samples saw.
type memorySampled struct{}

func (memorySampled) read(a *acct, r *reading) {
	r.u.MemoryPeak, r.u.MemorySampled = a.sMem, true
	r.memSinceMark = a.sMarkMem
}

func (memorySampled) mark(a *acct, _ *reading) { a.sMarkMem = 0 }

func (memorySampled) release(a *acct, _ time.Duration) {
	a.sMem, a.sMarkMem = max(a.sMem, a.rootRSS), max(a.sMarkMem, a.rootRSS)
}

// memoryEventsV2 are the OOM kills and throttlings of the tree's v2
// cgroup, and the times it reached its limit (memory.events).
type memoryEventsV2 struct{ counters }

func (memoryEventsV2) read(a *acct, r *reading) {
	if b, err := a.readSmall(filepath.Join(a.v2, "memory.events")); err == nil {
		r.u.OOMKills, r.u.Throttled = keyed(b, "oom_kill"), keyed(b, "high")
		r.memHits = keyed(b, "max")
	}
}

// memoryEventsV1 are the OOM kills of the tree's v1 memory cgroup
// (memory.oom_control).
type memoryEventsV1 struct{ counters }

func (memoryEventsV1) read(a *acct, r *reading) {
	if b, err := a.readSmall(filepath.Join(a.v1.dir[v1Memory], v1MemoryOOM)); err == nil {
		r.u.OOMKills = keyed(b, "oom_kill")
	}
}

// setV2HostLimits sets the home's memory limit (0: none).
func setV2HostLimits(home string, l Limits, ctl ctlSet) error {
	if l.MemoryMax != 0 || ctl&ctlMemory != 0 {
		if err := writeLimit(filepath.Join(home, "memory.max"), l.MemoryMax); err != nil {
			return err
		}
		swap := "0"
		if l.MemoryMax == 0 {
			swap = "max"
		}
		if err := writeFile(filepath.Join(home, "memory.swap.max"), swap); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// setV1Memory sets a v1 memory cgroup's limit to n bytes (0: none), and
// its memory+swap limit to the same where swap is accounted, in the
// order the kernel accepts (memory+swap is never below memory).
func setV1Memory(dir string, n int64) error {
	v := strconv.FormatInt(n, 10)
	if n == 0 {
		v = "-1"
	}
	limit, memsw := filepath.Join(dir, "memory.limit_in_bytes"), filepath.Join(dir, "memory.memsw.limit_in_bytes")
	err := writeFile(limit, v)
	if errors.Is(err, unix.EINVAL) {
		// Raising it above memory+swap: raise that first.
		if err := writeFile(memsw, v); err != nil {
			return err
		}
		return writeFile(limit, v)
	}
	if err != nil {
		return err
	}
	if err := writeFile(memsw, v); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
