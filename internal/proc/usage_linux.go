//go:build linux

package proc

import (
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// acct is a tree's accounting: where its figures are read, what the
// samples saw, and the marks.
type acct struct {
	plan limitPlan
	v2   string // the tree's v2 cgroup; "" at the tracking level
	// v2ctl are the controllers of the tree's v2 cgroup (its home's): its
	// memory.events and pids.events are read when they are there.
	v2ctl ctlSet
	v1    *v1Run
	// figs read the figures from the sources plan chose, in figArray: the
	// figures first (peaks, CPU time), then from nFig on the counters of
	// what the limits did (the controllers' events; see controller), which
	// Counts reads alone.
	figs     []figure
	nFig     int
	figArray [2 * numControllers]figure
	// cpuBase is cpu.stat's usage_usec when the tree started, in a
	// cgroup reused from an earlier tree.
	cpuBase int64

	mu sync.Mutex // guards the fields below
	// Samples, for the figures the plan samples (see sample).
	sMem, sTasks         int64         // the most seen
	sCPU                 time.Duration // the most seen
	sMarkMem, sMarkTasks int64         // the most seen since the latest mark
	// markSeq numbers the marks taken.
	markSeq uint64
	// markFd is memory.peak, opened and reset at the latest mark (cgroup
	// v2 on Linux 6.12 and newer): reading it gives the peak since; -1
	// when there is none.
	markFd int
	// markV1 says that the v1 memory peak was reset at the latest mark.
	markV1 bool
	// final is the last reading, taken when the tree was released; later
	// calls report it.
	final *reading
	// reads counts the readings of every figure (Usage, Mark, Since, the
	// final one) and counts those of the counters alone (Counts): what a
	// tree's accounting costs in reads, which tests check.
	reads, counts int
	// held are the figures' files prepare opened (path → descriptor),
	// read with pread until the final reading; holding says that
	// prepare is reading, and keeps what it opens.
	held    map[string]int
	holding bool
	// rootRSS is the root's peak resident set size when it was reaped
	// (its rusage's ru_maxrss: its own, and its reaped descendants'), in
	// bytes: the least a sampled memory peak is, for a tree that ended
	// between two samples.
	rootRSS int64
}

// reading is one reading of a tree's figures and counters, from its
// start.
type reading struct {
	u Usage
	// memHits counts the times the tree reached its own memory limit
	// (v2 memory.events max): an OOM kill without one was caused by a
	// limit above the tree's. Cgroup v1 does not count them (its failcnt
	// stays 0 on recent kernels): there the peak tells (see reached).
	memHits int64
	// memSinceMark is the peak since the latest mark, -1 if unknown.
	memSinceMark int64
}

// newAcct returns the accounting of a tree with plan, or nil when the plan
// holds nothing to account.
func newAcct(plan limitPlan, v2 string, v2ctl ctlSet, v1 *v1Run) *acct {
	if !plan.any() {
		return nil
	}
	a := &acct{plan: plan, v2: v2, v2ctl: v2ctl, v1: v1, markFd: -1}
	a.figs = a.figArray[:0]
	for _, c := range controllers {
		if f := c.figure(&plan); f != nil {
			a.figs = append(a.figs, f)
		}
	}
	a.nFig = len(a.figs)
	for _, c := range controllers {
		if f := c.events(v2ctl, v1); f != nil {
			a.figs = append(a.figs, f)
		}
	}
	return a
}

// read reads the tree's figures now (or the final ones).
func (a *acct) read() reading {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.readLocked()
}

func (a *acct) readLocked() reading {
	if a.final != nil {
		return *a.final
	}
	a.reads++
	r := reading{u: Usage{Limits: a.plan.limits}, memSinceMark: -1}
	for _, f := range a.figs {
		f.read(a, &r)
	}
	u := &r.u
	u.OOMOutside = u.OOMKills > 0 && !a.reached(r.memHits, u.MemoryPeak)
	return r
}

// readCounts reads the counters alone (see Tree.Counts), or the final
// reading.
func (a *acct) readCounts() Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final != nil {
		return a.final.u
	}
	a.counts++
	r := reading{u: Usage{Limits: a.plan.limits}, memSinceMark: -1}
	for _, f := range a.figs[a.nFig:] {
		f.read(a, &r)
	}
	return r.u
}

// reached reports whether the tree reached its own memory limit, given
// the v2 count of times it did (hits) or, on cgroup v1, its peak: the
// charge that fails reaches the limit first, while a tree OOM-killed by a
// limit above its own stays below it (allowing for the charges the kernel
// batches per CPU).
func (a *acct) reached(hits, peak int64) bool {
	limit := a.plan.limits.MemoryMax
	switch {
	case limit == 0:
		return false
	case a.v2ctl&ctlMemory != 0:
		return hits > 0
	}
	return peak >= limit-max(1<<20, limit/100)
}

// mark starts a new period; see Tree.Mark.
func (a *acct) mark() (uint64, reading) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.readLocked()
	a.markSeq++
	for _, f := range a.figs {
		f.mark(a, &r)
	}
	a.sMarkTasks = 0
	return a.markSeq, r
}

// sample records what one look at the tree's members saw: procs are the
// members found (zombies too: their CPU time is not yet their parent's).
func (a *acct) sample(procs []procInfo) {
	var mem, tasks int64
	var ticks uint64
	for i := range procs {
		p := &procs[i]
		ticks += p.cpu
		if !p.zombie() {
			mem += int64(p.rss) * int64(pageSize)
			tasks += int64(p.threads)
		}
	}
	cpu := time.Duration(ticks) * (time.Second / userHZ)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final != nil {
		return
	}
	a.sMem, a.sMarkMem = max(a.sMem, mem), max(a.sMarkMem, mem)
	a.sTasks, a.sMarkTasks = max(a.sTasks, tasks), max(a.sMarkTasks, tasks)
	a.sCPU = max(a.sCPU, cpu)
}

// pageSize is the size of the pages rss counts.
var pageSize = unix.Getpagesize()

// release takes the final reading (rootCPU is the root's rusage, which
// holds the descendants it reaped: sampled CPU time is at least that) and
// lets go of the mark's descriptor, and of the files prepare opened: it
// returns fds with their descriptors appended, for the caller to close.
func (a *acct) release(rootCPU time.Duration, fds []int) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final != nil {
		return fds
	}
	for _, f := range a.figs {
		f.release(a, rootCPU)
	}
	r := a.readLocked()
	a.final = &r
	fds = a.dropHeld(fds)
	if a.markFd >= 0 {
		unix.Close(a.markFd)
		a.markFd = -1
	}
	return fds
}

// The Tree's accounting methods on Linux.

func (t *Tree) usage() Usage {
	a := t.sys.acct
	if a == nil {
		return Usage{}
	}
	r := a.read()
	u := r.u
	u.RootOOMKilled = u.OOMKills > 0 && t.rootKilledByKernel()
	return u
}

func (t *Tree) counts() Usage {
	a := t.sys.acct
	if a == nil {
		return Usage{}
	}
	u := a.readCounts()
	u.RootOOMKilled = u.OOMKills > 0 && t.rootKilledByKernel()
	return u
}

func (t *Tree) mark() Mark {
	m := Mark{tree: t}
	if a := t.sys.acct; a != nil {
		var r reading
		m.seq, r = a.mark()
		m.base, m.baseHits = r.u, r.memHits
	}
	m.exited = isClosed(t.exited)
	return m
}

func (t *Tree) since(m Mark) Usage {
	a := t.sys.acct
	if a == nil {
		return Usage{}
	}
	a.mu.Lock()
	r := a.readLocked()
	latest := m.seq == a.markSeq
	a.mu.Unlock()
	u := r.u
	if m.seq == 0 {
		u.RootOOMKilled = u.OOMKills > 0 && t.rootKilledByKernel()
		return u
	}
	b := m.base
	u.CPU -= b.CPU
	u.OOMKills -= b.OOMKills
	u.ForksRefused -= b.ForksRefused
	u.Throttled -= b.Throttled
	if latest && r.memSinceMark >= 0 {
		u.MemoryPeak = r.memSinceMark
	}
	u.OOMOutside = u.OOMKills > 0 && !a.reached(r.memHits-m.baseHits, u.MemoryPeak)
	if latest && a.plan.tasks == srcSample {
		a.mu.Lock()
		u.TasksPeak = a.sMarkTasks
		a.mu.Unlock()
	}
	u.RootOOMKilled = u.OOMKills > 0 && !m.exited && t.rootKilledByKernel()
	return u
}

// rootKilledByKernel reports whether the root has exited, killed by a
// SIGKILL that neither Kill nor Signal(Kill) sent.
func (t *Tree) rootKilledByKernel() bool {
	if !isClosed(t.exited) {
		return false
	}
	return t.sys.exitSignal == int32(unix.SIGKILL) && !t.sys.killSent.Load()
}

// exitSignal returns the signal that ended the child described by info
// (a waitid result), or 0 when it exited by itself.
func exitSignal(info *unix.Siginfo) int32 {
	if info.Code != _CLD_KILLED && info.Code != _CLD_DUMPED {
		return 0
	}
	return siginfoStatus(info)
}

// siginfoStatus returns the si_status of a SIGCHLD siginfo: the exit code,
// or the signal. The union after the first three fields starts at the
// first word boundary and holds the pid, the uid, then the status.
func siginfoStatus(info *unix.Siginfo) int32 {
	off := unsafe.Sizeof(info.Signo) * 3
	if align := unsafe.Alignof(uintptr(0)); off%align != 0 {
		off += align - off%align
	}
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), off+8))
}

// The si_code values of SIGCHLD.
const (
	_CLD_EXITED = 1
	_CLD_KILLED = 2
	_CLD_DUMPED = 3
)

// noteRootRSS records the root's peak resident set size, in bytes, once
// it is reaped (see acct.rootRSS).
func (a *acct) noteRootRSS(n int64) {
	a.mu.Lock()
	a.rootRSS = n
	a.mu.Unlock()
}
