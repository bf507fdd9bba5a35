package driver

import (
	"errors"
	"time"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// supervise waits until the root process exits. Meanwhile it watches the
// caller's context, the timeouts and fatal conditions, and walks the
// cancellation ladder when one of them fires. It returns why the run was
// stopped, or nil if the CLI exited by itself.
func (r *run) supervise() error {
	cfg := r.cfg
	var stopErr error
	ctxDone := r.ctx.Done()
	fatal := r.fatal
	panicCh := r.panicCh

	// The run's one turn has the turn timeouts a session's turns have.
	timers := newTurnTimers(cfg, r)
	defer timers.stop()
	firstEvent := r.firstEvent

	// The ladder: interrupt, then terminate, then kill, each step after the
	// previous one's grace period. Steps with a zero grace are skipped, and
	// so is a signal the CLI ignores (SIG_IGN, which the kernel discards:
	// waiting its grace would only delay the next step). A stop for the
	// caller's context may bring graces of its own (see
	// Options.StopGraces).
	g := graces{interrupt: cfg.interruptGrace, terminate: cfg.terminateGrace}
	var ladder *time.Timer
	var ladderC <-chan time.Time
	step := 0
	next := func() {
		for step < 3 {
			step++
			var grace time.Duration
			switch step {
			case 1:
				if grace = g.interrupt; grace == 0 {
					continue
				}
				// Ctrl-C through the terminal reaches a CLI that reads it
				// raw whatever its disposition for SIGINT.
				if r.pty == nil && r.ignored(stepInterrupt, proc.Interrupt) {
					continue
				}
				r.interrupt()
			case 2:
				if grace = g.terminate; grace == 0 || r.ignored(stepTerminate, proc.Terminate) {
					continue
				}
				r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Terminate.String())
				r.tel.ladder(stepTerminate)
				r.tree.Signal(proc.Terminate)
			case 3:
				r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String())
				r.tel.ladder(stepKill)
				rep := r.tree.Kill()
				r.log.Debug("killed process tree", "killed", rep.Killed, "elapsed", rep.Elapsed)
				return
			}
			if ladder == nil {
				ladder = time.NewTimer(grace)
			} else {
				ladder.Reset(grace)
			}
			ladderC = ladder.C
			return
		}
	}
	defer func() {
		if ladder != nil {
			ladder.Stop()
		}
	}()
	stop := func(err error) {
		if stopErr != nil {
			return
		}
		stopErr = err
		r.tel.stopping(err)
		r.log.Debug("stopping", "pid", r.tree.Pid(), "reason", err)
		next()
	}

	for {
		select {
		case <-r.tree.Exited():
			return stopErr
		case <-ctxDone:
			ctxDone = nil
			if stopErr == nil {
				g = cfg.stopGraces(r.ctx)
			}
			stop(ctxError(r.ctx))
		case err := <-fatal:
			fatal = nil
			stop(err)
		case <-panicCh:
			// A panic in OnEvent is a bug of the caller's: do not wait
			// for a polite exit.
			panicCh = nil
			if stopErr == nil {
				stopErr = errors.New(r.panicWhat + " panicked")
				r.tel.stopping(stopErr)
			}
			step = 3
			r.tel.ladder(stepKill)
			r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String(), "reason", r.panicWhat+" panicked")
			r.tree.Kill()
		case <-firstEvent:
			firstEvent = nil
			timers.firstEvent()
		case <-timers.firstC:
			if err := timers.firstDue(r.firstEvent); err != nil {
				stop(err)
			}
		case <-timers.idleC:
			if err := timers.idleDue(); err != nil {
				stop(err)
			}
		case <-ladderC:
			ladderC = nil
			next()
		}
	}
}

// ignored reports whether the CLI's process ignores sig now, and then
// records the ladder's step as skipped: the signal would be discarded.
func (r *run) ignored(step string, sig proc.Signal) bool {
	if !r.tree.Ignores(sig) {
		return false
	}
	r.log.Debug("signal skipped: the CLI ignores it", "pid", r.tree.Pid(), "signal", sig.String())
	r.tel.ladderSkipped(step)
	return true
}

// interrupt is the ladder's first step: Ctrl-C through the terminal in PTY
// mode, else SIGINT to the root's process group. SIGINT comes first because
// it is the signal the real CLIs handle best: Claude Code records the turn
// and kills its own tools only on SIGINT (docs/cli-facts.md).
func (r *run) interrupt() {
	r.tel.ladder(stepInterrupt)
	if r.pty != nil {
		r.tree.Snapshot() // Signal would take it; Ctrl-C bypasses Signal
		r.log.Debug("signal", "pid", r.tree.Pid(), "signal", "Ctrl-C (PTY)")
		if _, err := r.pty.Write([]byte{0x03}); err == nil {
			return
		}
	}
	r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Interrupt.String())
	r.tree.Signal(proc.Interrupt)
}
