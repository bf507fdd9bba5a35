//go:build linux

package proc

import (
	"sync"
	"time"
)

// Sampled accounting, for the figures no controller holds (see Usage).
//
// At the Tracking level every look at a tree's members (the tracker's
// recording every RecordEvery, Signal's, Kill's) is also a sample: the
// members' /proc/PID/stat lines are read by the scan or walk anyway, and
// they hold the CPU times, the resident set size and the thread count
// (see treeSys.memberSet). It costs nothing more.
//
// At the Cgroup level nothing scans /proc. A tree whose memory or task
// figure has no controller (cgroup v2 without the controller delegated,
// and no cgroup v1 the host may write: the usual non-root host) is
// sampled by the sampler: one goroutine for every such tree of the host,
// which lists each tree's members from its cgroup.procs and reads their
// stat lines, every RecordEvery. A pass that takes long (thousands of trees)
// spaces the next one out to 20 times its length, so that sampling never
// takes more than 5% of one CPU. The goroutine runs while some tree is
// sampled.
var sampler struct {
	mu    sync.Mutex
	trees map[*Tree]struct{}
	quit  chan struct{} // closed when trees becomes empty
}

// startSampling adds t to the trees the sampler samples.
func startSampling(t *Tree) {
	sampler.mu.Lock()
	defer sampler.mu.Unlock()
	if sampler.trees == nil {
		sampler.trees = map[*Tree]struct{}{}
	}
	sampler.trees[t] = struct{}{}
	if sampler.quit == nil {
		sampler.quit = make(chan struct{})
		go sampleLoop(sampler.quit)
	}
}

// stopSampling removes t from the sampled trees, after a last sample.
func stopSampling(t *Tree) {
	sampler.mu.Lock()
	_, ok := sampler.trees[t]
	delete(sampler.trees, t)
	if ok && len(sampler.trees) == 0 {
		close(sampler.quit)
		sampler.quit = nil
	}
	sampler.mu.Unlock()
	if ok {
		t.sampleCgroup(new(procReader))
	}
}

// sampleLoop is the sampler; it returns when quit is closed.
func sampleLoop(quit chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var r procReader
	var trees []*Tree
	wait := defaultTuning.trackEvery
	for {
		sampler.mu.Lock()
		every := defaultTuning.trackEvery
		trees = trees[:0]
		for t := range sampler.trees {
			trees = append(trees, t)
			if e := t.sys.tune.trackEvery; e > 0 && e < every {
				every = e
			}
		}
		sampler.mu.Unlock()
		timer.Reset(max(wait, every))
		select {
		case <-quit:
			return
		case <-timer.C:
		}
		begin := time.Now()
		for _, t := range trees {
			t.sampleCgroup(&r)
		}
		wait = 20 * time.Since(begin)
	}
}

// sampleCgroup samples the members of a tree at the Cgroup level.
func (t *Tree) sampleCgroup(r *procReader) {
	s := &t.sys
	if s.cg == nil || s.acct == nil {
		return
	}
	var procs []procInfo
	for _, pid := range s.cg.pids() {
		if p, err := r.stat(pid); err == nil {
			procs = append(procs, p)
		}
	}
	s.acct.sample(procs)
}
