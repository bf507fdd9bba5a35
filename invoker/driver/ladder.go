package driver

import (
	"context"
	"errors"
	"time"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// supervise waits until the root process exits. Meanwhile it takes the
// requests to stop the run (stop: a turn's cancel or timeout, a fatal
// condition a reader found, a session's end), watches the run's context
// and the caller's callbacks, and walks the ladder when one of them asks.
// It returns why the run was stopped, or nil if the CLI exited by itself.
func (r *run) supervise() error {
	var stopErr error
	l := ladder{r: r}
	defer l.stopTimer()
	var ctxDone <-chan struct{}
	if r.ctx != nil {
		ctxDone = r.ctx.Done()
	}
	panicked := r.cb.done
	stop := func(why error, g graces) {
		if stopErr != nil {
			return // the first stop wins
		}
		stopErr = why
		r.tel.stopping(why)
		r.log.Debug("stopping", "pid", r.tree.Pid(), "reason", why)
		l.begin(g)
	}
	for {
		select {
		case <-r.tree.Exited():
			return stopErr
		case <-ctxDone:
			ctxDone = nil
			stop(ctxError(r.ctx), r.cfg.stopGraces(r.ctx))
		case req := <-r.stops:
			stop(req.why, req.g)
		case <-panicked:
			// A panic in a callback is a bug of the caller's: do not wait
			// for a polite exit.
			panicked = nil
			if stopErr == nil {
				stopErr = errors.New(r.cb.what + " panicked")
				r.tel.stopping(stopErr)
			}
			if r.cb.stack != nil {
				r.log.Error(r.cb.what+" panicked", "panic", r.cb.val, "stack", string(r.cb.stack))
			}
			l.kill(r.cb.what + " panicked")
		case <-l.c:
			l.next()
		}
	}
}

// graces are the two grace periods of the cancellation ladder; zero skips
// a step.
type graces struct {
	interrupt time.Duration
	terminate time.Duration
}

// graces returns the Invoker's own graces, for a stop that is not for a
// context.
func (c *config) graces() graces {
	return graces{interrupt: c.interruptGrace, terminate: c.terminateGrace}
}

// stopGraces returns the grace periods of a run or session stopped because
// ctx is done: Options.StopGraces's answer for the cancel's cause, if it
// gives one, else the Invoker's own.
func (c *config) stopGraces(ctx context.Context) graces {
	return c.gracesFor(context.Cause(ctx))
}

// gracesFor returns Options.StopGraces's answer for cause, if it gives
// one, else the Invoker's own graces.
func (c *config) gracesFor(cause error) graces {
	g := c.graces()
	if c.choose == nil {
		return g
	}
	if i, t, ok := c.choose(cause); ok {
		g = graces{interrupt: max(i, 0), terminate: max(t, 0)}
	}
	return g
}

// A ladder walks the steps of a stop: interrupt, then terminate, then
// kill, each after the previous one's grace. Steps with a zero grace are
// skipped. A step's signal is sent at once, and only then does the ladder
// ask whether the CLI's process ignores it (SIG_IGN, which the kernel
// discards): if it does, waiting its grace would only delay the next
// step, which the ladder takes at once. The rest of the process group has
// received the signal all the same, and its tools may handle it. Only
// supervise uses it.
type ladder struct {
	r     *run
	g     graces
	step  int // the last step taken: 0 none, 1 interrupt, 2 terminate, 3 kill
	timer *time.Timer
	c     <-chan time.Time // fires when the current step's grace has passed
}

// begin walks the ladder with the graces g.
func (l *ladder) begin(g graces) {
	l.g = g
	l.next()
}

// next takes the next step that is not skipped, and sets the timer for its
// grace.
func (l *ladder) next() {
	l.c = nil
	r := l.r
	for l.step < 3 {
		l.step++
		var grace time.Duration
		switch l.step {
		case 1:
			if grace = l.g.interrupt; grace == 0 || !r.interrupt() {
				continue
			}
		case 2:
			if grace = l.g.terminate; grace == 0 || !r.signal(stepTerminate, proc.Terminate) {
				continue
			}
		case 3:
			l.kill("")
			return
		}
		if l.timer == nil {
			l.timer = time.NewTimer(grace)
		} else {
			l.timer.Reset(grace)
		}
		l.c = l.timer.C
		// The CLI was asked to stop and is given its grace: open now
		// what the end of the run reads once it has exited.
		r.tree.Prepare()
		return
	}
}

// kill takes the last step at once, for reason ("" for the end of the
// ladder).
func (l *ladder) kill(reason string) {
	l.step, l.c = 3, nil
	r := l.r
	r.tel.ladder(stepKill)
	if reason != "" {
		r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String(), "reason", reason)
		r.tree.Kill()
		return
	}
	r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String())
	rep := r.tree.Kill()
	r.log.Debug("killed process tree", "killed", rep.Killed, "elapsed", rep.Elapsed)
}

func (l *ladder) stopTimer() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// signal sends sig to the root's process group as the ladder's step, and
// reports whether the step's grace is to be waited: false when the root
// ignores sig, which is then recorded as the step, skipped. The signal is
// sent before that is asked, so that reading the root's dispositions does
// not delay a cancel.
func (r *run) signal(step string, sig proc.Signal) bool {
	r.log.Debug("signal", "pid", r.tree.Pid(), "signal", sig.String())
	r.tree.Signal(sig)
	if r.tree.Ignores(sig) {
		r.log.Debug("signal ignored by the CLI: its grace skipped", "pid", r.tree.Pid(), "signal", sig.String())
		r.tel.ladderSkipped(step)
		return false
	}
	r.tel.ladder(step)
	return true
}

// interrupt is the ladder's first step: Ctrl-C through the terminal in PTY
// mode, else SIGINT to the root's process group (signal). It reports
// whether the step's grace is to be waited. SIGINT comes first because it
// is the signal the real CLIs handle best: Claude Code records the turn
// and kills its own tools only on SIGINT (docs/cli-facts.md). Ctrl-C
// through the terminal reaches a CLI that reads it raw whatever its
// disposition for SIGINT.
func (r *run) interrupt() bool {
	if r.pty != nil {
		r.tree.Snapshot() // Signal would take it; Ctrl-C bypasses Signal
		r.log.Debug("signal", "pid", r.tree.Pid(), "signal", "Ctrl-C (PTY)")
		if _, err := r.pty.Write([]byte{0x03}); err == nil {
			r.tel.ladder(stepInterrupt)
			return true
		}
	}
	return r.signal(stepInterrupt, proc.Interrupt)
}
