package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// Admission to the host's Budget: every run and session waits in the
// Budget's queue (internal/admit) before anything of it starts, in
// engine.start, and gives its share back once its tree is reaped, in
// run.wait. A run that fails rate limited closes its backend's gate
// (turn.run, where every turn's error is decided).

// budgetQueue returns the Budget of Options.Budget and the Queue shared by
// every Invoker given the same pointer, or why it cannot be used.
func budgetQueue(b *invoker.Budget) (*invoker.Budget, *admit.Queue, error) {
	if b == nil {
		return nil, nil, nil
	}
	if b.Runs < 0 || b.Memory < 0 {
		return b, nil, invalid("Options.Budget has a negative field (Runs %d, Memory %d): set the most runs and bytes at once, or 0 for no bound", b.Runs, b.Memory)
	}
	if m := proc.MaxLimits().MemoryMax; b.Memory > m {
		return b, nil, invalid("Options.Budget.Memory is %d bytes, above the largest the kernel takes: %d (from %d bytes up it holds no limit at all): set at most that, or 0 for no bound", b.Memory, m, m+1)
	}
	q := admit.Shared(b, func() *admit.Queue {
		return admit.New(admit.Amounts{Runs: int64(b.Runs), Memory: b.Memory})
	})
	return b, q, nil
}

// checkPromise checks that a run of limits l can be admitted to the
// Budget: a Memory budget counts the runs' memory limits, so a run must
// have one, no larger than the whole budget.
func (c *config) checkPromise(l invoker.Limits) error {
	capacity := c.queue.Capacity()
	switch {
	case capacity.Memory == 0:
	case l.Memory == 0:
		return invalid("Options.Budget.Memory bounds the memory the runs promise, and this run promises none: set Options.Limits.Memory (or Request.Limits.Memory) to the most it may use")
	case l.Memory > capacity.Memory:
		return invalid("Limits.Memory (%s) is more than the whole Budget.Memory (%s): the run could never be admitted; lower the limit or raise the budget", proc.FormatBytes(l.Memory), proc.FormatBytes(capacity.Memory))
	}
	return nil
}

// admit waits until the run r fits the Budget, telling r.onQueued where
// it stands meanwhile, and records its grant and how long it waited. On
// error nothing is held, and the error matches the context's.
func (e *engine) admit(ctx context.Context, r *run) error {
	q := e.cfg.queue
	if q == nil {
		return nil
	}
	e.cfg.holdSum(r.log)
	req := admit.Request{Need: admit.Amounts{Runs: 1, Memory: r.limits.Memory}}
	if e.cfg.budget.WaitRateLimits {
		req.Gate = e.cfg.cli
	}
	waiting := false
	defer func() {
		if waiting {
			r.tel.waiting(-1)
		}
	}()
	req.OnWait = func(w admit.Wait) {
		if !waiting {
			waiting = true
			r.tel.waiting(1)
		}
		r.tel.queued(w)
		r.log.Debug("queued for the budget", "ahead", w.Ahead, "gate", w.Gate, "until", w.Until)
		if r.onQueued != nil {
			r.onQueued(queuedEvent(w))
		}
	}
	g, err := q.Acquire(ctx, req)
	var we *admit.WaitError
	switch {
	case errors.As(err, &we):
		r.queued = we.Waited
		r.tel.admitted(we.Waited, false)
		return &queuedError{we: we, err: ctxError(ctx)}
	case err != nil: // too large: checkPromise refuses it first
		return invalid("%v", err)
	}
	r.grant, r.queued = g, g.Waited()
	r.tel.admitted(r.queued, true)
	return nil
}

// queuedEvent is the KindQueued event of a run that waits where w says.
func queuedEvent(w admit.Wait) invoker.Event {
	ev := invoker.Event{Kind: invoker.KindQueued, Ahead: w.Ahead, Text: fmt.Sprintf("queued: %d ahead", w.Ahead)}
	if w.Gate != "" {
		ev.RateLimit = &invoker.RateLimit{Status: "rejected", ResetsAt: w.Until}
		ev.Text = fmt.Sprintf("queued: %d ahead at the rate limit of %s, which resets at %s", w.Ahead, w.Gate, w.Until.UTC().Format(time.RFC3339))
	}
	return ev
}

// queuedError is the error of a run whose context was done while it
// waited for the Budget: it matches the context's error, and says where
// the run stood. Nothing was started.
type queuedError struct {
	we  *admit.WaitError
	err error // ctxError of the context
}

func (e *queuedError) Error() string {
	w := e.we
	switch {
	case w.Gate != "":
		return fmt.Sprintf("queued for %v at the rate limit of %s (it resets at %s), %d ahead; nothing was started: %v",
			w.Waited.Round(time.Millisecond), w.Gate, w.Until.UTC().Format(time.RFC3339), w.Ahead, e.err)
	case w.Waited == 0 && w.Ahead == 0:
		return "not admitted to the host's budget; nothing was started: " + e.err.Error()
	}
	return fmt.Sprintf("queued for %v for the host's budget (Options.Budget), %d ahead; nothing was started: %v",
		w.Waited.Round(time.Millisecond), w.Ahead, e.err)
}

func (e *queuedError) Unwrap() error { return e.err }

// closeGate closes the backend's rate-limit gate until the limit resets,
// when err is a run's error for a rate limit with a reset time and the
// Budget asks for it (Budget.WaitRateLimits).
func (c *config) closeGate(err error) {
	if c.queue == nil || !c.budget.WaitRateLimits || err == nil {
		return
	}
	var le *invoker.LimitError
	if errors.As(err, &le) && errors.Is(le.Limit, invoker.ErrRateLimited) && !le.ResetsAt.IsZero() {
		c.queue.CloseGate(c.cli, le.ResetsAt)
		c.logger.Debug("rate limited: new runs wait at the gate", "until", le.ResetsAt)
	}
}

// holdSum asks the kernel to hold the Budget's memory sum on the cgroup
// that holds all of the process's runs under the cgroup parent (once per
// parent and sum, see proc.HoldHostMemory). Where it cannot, admission
// alone holds the sum; the log says why (and Capabilities.LimitsNote).
func (c *config) holdSum(log interface{ Debug(string, ...any) }) {
	m := c.queue.Capacity().Memory
	if m == 0 {
		return
	}
	if err := proc.HoldHostMemory(c.cgroupParent, m); err != nil {
		log.Debug("the kernel cannot hold the budget's memory sum; admission alone holds it", "err", err)
	}
}
