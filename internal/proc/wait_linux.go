//go:build linux

package proc

import (
	"errors"
	"math"
	"time"
)

func (t *Tree) wait() (State, error) {
	s := &t.sys
	if s.waited.Swap(true) {
		return State{}, errors.New("proc: Wait called twice")
	}
	<-t.exited
	if s.cg != nil {
		return t.waitCgroup()
	}
	s.stopTracking()
	if s.reapLate.Load() {
		// Before the root is reaped: its group and session ids stay valid.
		timer := time.NewTimer(s.tune.signalScanTimeout)
		sn, err, ok := s.scanner().scanUntil(&s.tune, math.MaxUint64, s.rootStart, nil, timer.C)
		timer.Stop()
		if !ok || err != nil {
			sn = nil
		}
		s.reapLater(t, sn)
	}
	dropRoot(s.root)
	st, cpu, err := s.reapRoot()
	<-s.done
	if s.marker != "" {
		s.scanner().unregister(s.marker)
	}
	t.finish(cpu)
	if err != nil {
		return State{}, err
	}
	t.log.Debug("proc: reaped", "pid", t.pid, "code", st.Code, "signal", st.Signal)
	return st, nil
}

// reapLater reaps the zombies an earlier Kill could not reap yet.
func (s *treeSys) reapLater(t *Tree, sn *snapshot) {
	s.knownMu.Lock()
	late := s.late
	s.knownMu.Unlock()
	s.reap(t, sn, late)
}
