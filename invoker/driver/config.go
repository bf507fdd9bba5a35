package driver

import (
	"log/slog"
	"time"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// The defaults of invoker.Options, as its documentation states them.
const (
	defaultInterruptGrace     = 1 * time.Second
	defaultTerminateGrace     = 2 * time.Second
	defaultTurnInterruptGrace = 5 * time.Second
	defaultWaitDelay          = 250 * time.Millisecond
	defaultMaxLineSize        = 64 << 20
	defaultStderrTail         = 64 << 10
	// defaultIdleTimeout outlasts the longest silence a working CLI
	// keeps by design: a shell tool at Claude Code's largest timeout (10
	// minutes) prints nothing until it ends.
	defaultIdleTimeout = 15 * time.Minute
)

// config is the engine's reading of the user's invoker.Options, with every
// default applied. Durations are never negative: zero means "none".
type config struct {
	cli               string // the backend's name
	binary            string
	interruptGrace    time.Duration
	terminateGrace    time.Duration
	choose            func(cause error) (interrupt, terminate time.Duration, ok bool)
	turnGrace         time.Duration
	waitDelay         time.Duration
	firstEventTimeout time.Duration
	idleTimeout       time.Duration
	maxLineSize       int
	stderrTail        int
	logger            *slog.Logger
	pty               bool
	subreaper         bool
	env               []string
	inheritEnv        func(key string) bool
	containment       string
	cgroupParent      string
	sweepTurns        bool
	// limits are Options.Limits; a request's replace its non-zero fields.
	limits  invoker.Limits
	sandbox invoker.Sandbox // Options.Sandbox
	// budget is Options.Budget, and queue the Queue every Invoker given
	// the same *Budget shares (nil without one); budgetErr says why a
	// Budget cannot be used (a negative field), for every call.
	budget    *invoker.Budget
	queue     *admit.Queue
	budgetErr error
	// delegateErr is why Options.DelegateCgroup failed, if it did.
	delegateErr error
	// account measures every run's usage (proc.Attr.Account); only the
	// benchmark of its cost turns it off (export_test.go).
	account bool
	// keepCancelled skips the sweep of cancelled turns; only the
	// benchmark of the sweep's cost sets it (export_test.go).
	keepCancelled bool
	// published, if not nil, is called by a session's begin once the turn
	// is the session's current one; only a test of what may reach the CLI
	// meanwhile sets it (export_test.go).
	published func()
	// steered, if not nil, is called by Steer once the protocol made the
	// steer's lines and they are queued; only a test of what may reach the
	// CLI meanwhile sets it (export_test.go).
	steered func()
	// answered, if not nil, is called once a decision of Approve is
	// settled and its answer queued; only a test of what may reach the
	// CLI meanwhile sets it (export_test.go).
	answered func()
	// tel records the runs' spans and metrics; nil records nothing (a
	// baseline for benchmarks).
	tel *telemetry
}

// merge returns opts folded into one, as invoker.Options documents it:
// each non-zero field of a later Options replaces the field of an earlier
// one, and Env is appended. A bool is no exception: its zero value, false,
// means "not set", so a later Options switches one on and never off.
func merge(opts []invoker.Options) invoker.Options {
	var o invoker.Options
	for _, n := range opts {
		env := append(o.Env[:len(o.Env):len(o.Env)], n.Env...)
		set(&o.Binary, n.Binary)
		if n.InheritEnv != nil {
			o.InheritEnv = n.InheritEnv
		}
		set(&o.FirstEventTimeout, n.FirstEventTimeout)
		set(&o.IdleTimeout, n.IdleTimeout)
		set(&o.InterruptGrace, n.InterruptGrace)
		set(&o.TerminateGrace, n.TerminateGrace)
		if n.StopGraces != nil {
			o.StopGraces = n.StopGraces
		}
		set(&o.TurnInterruptGrace, n.TurnInterruptGrace)
		set(&o.WaitDelay, n.WaitDelay)
		set(&o.MaxLineSize, n.MaxLineSize)
		set(&o.StderrTail, n.StderrTail)
		if n.Logger != nil {
			o.Logger = n.Logger
		}
		set(&o.PTY, n.PTY)
		set(&o.Subreaper, n.Subreaper)
		set(&o.Containment, n.Containment)
		set(&o.CgroupParent, n.CgroupParent)
		set(&o.SweepEveryTurn, n.SweepEveryTurn)
		o.Limits = overrideLimits(o.Limits, n.Limits)
		o.Sandbox = overrideSandbox(o.Sandbox, n.Sandbox)
		if n.Budget != nil {
			o.Budget = n.Budget
		}
		set(&o.DelegateCgroup, n.DelegateCgroup)
		if n.TracerProvider != nil {
			o.TracerProvider = n.TracerProvider
		}
		if n.MeterProvider != nil {
			o.MeterProvider = n.MeterProvider
		}
		o.Env = env
	}
	return o
}

func set[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// newConfig applies the defaults to opts.
func newConfig(opts []invoker.Options) config {
	o := merge(opts)
	c := config{
		binary:            o.Binary,
		interruptGrace:    duration(o.InterruptGrace, defaultInterruptGrace),
		terminateGrace:    duration(o.TerminateGrace, defaultTerminateGrace),
		choose:            o.StopGraces,
		turnGrace:         duration(o.TurnInterruptGrace, defaultTurnInterruptGrace),
		waitDelay:         duration(o.WaitDelay, defaultWaitDelay),
		firstEventTimeout: max(o.FirstEventTimeout, 0),
		idleTimeout:       duration(o.IdleTimeout, defaultIdleTimeout),
		maxLineSize:       defaultMaxLineSize,
		stderrTail:        defaultStderrTail,
		logger:            o.Logger,
		pty:               o.PTY,
		subreaper:         o.Subreaper,
		env:               o.Env,
		inheritEnv:        o.InheritEnv,
		containment:       o.Containment,
		cgroupParent:      o.CgroupParent,
		sweepTurns:        o.SweepEveryTurn,
		limits:            o.Limits,
		sandbox:           o.Sandbox,
		account:           true,
	}
	c.budget, c.queue, c.budgetErr = budgetQueue(o.Budget)
	if o.DelegateCgroup {
		c.delegateErr = proc.DelegateOwnCgroupOnce()
	}
	if o.MaxLineSize != 0 {
		c.maxLineSize = max(o.MaxLineSize, 64<<10)
	}
	if o.StderrTail != 0 {
		c.stderrTail = max(o.StderrTail, 1024)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.tel = newTelemetry(o.TracerProvider, o.MeterProvider)
	return c
}

// duration reads an Options duration: zero is the default, negative none.
func duration(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}
