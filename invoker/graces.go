package invoker

import (
	"context"
	"time"
)

// Graces are the two grace periods of the cancellation ladder (see
// WithInterruptGrace and WithTerminateGrace).
type Graces struct {
	// Interrupt is how long the CLI has to exit after the interrupt
	// (SIGINT, or Ctrl-C through the PTY) before SIGTERM. Zero skips the
	// interrupt.
	Interrupt time.Duration
	// Terminate is how long it has after SIGTERM before SIGKILL and the
	// sweep of its tree. Zero skips SIGTERM.
	Terminate time.Duration
}

type stopGracesKey struct{}

// WithStopGraces returns a copy of ctx whose runs, when they are stopped
// because the context is done, ask choose for their grace periods: choose
// gets the context's cause (context.Cause) and, when it returns ok, the run
// walks the ladder with the Graces it returned instead of the Invoker's own.
// It is called once per stopped run, from the goroutine that supervises
// it, and must return quickly.
//
// A server uses it to hurry the runs it stops for its own shutdown (its
// host may kill it moments later) while a client's cancel keeps the CLI's
// full grace; see the example. Runs stopped for another reason (a timeout,
// a fatal condition) keep the Invoker's graces.
func WithStopGraces(ctx context.Context, choose func(cause error) (g Graces, ok bool)) context.Context {
	return context.WithValue(ctx, stopGracesKey{}, choose)
}

// graces returns the grace periods of a run stopped because ctx is done.
func (c *config) graces(ctx context.Context) Graces {
	g := Graces{Interrupt: c.interruptGrace, Terminate: c.terminateGrace}
	choose, _ := ctx.Value(stopGracesKey{}).(func(error) (Graces, bool))
	if choose == nil {
		return g
	}
	if got, ok := choose(context.Cause(ctx)); ok {
		g = Graces{Interrupt: max(got.Interrupt, 0), Terminate: max(got.Terminate, 0)}
	}
	return g
}
