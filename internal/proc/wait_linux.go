//go:build linux

package proc

import (
	"math"
	"time"
)

// wait is Wait at the Tracking level, after the root has exited.
func (l *trackingLevel) wait(t *Tree) (State, error) {
	s := &t.sys
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
	if l.marker != "" {
		s.scanner().unregister(l.marker)
	}
	t.finish(cpu, nil)
	if s.usernsPin != nil {
		s.usernsPin.Close()
	}
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
