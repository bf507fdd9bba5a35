package driver

import (
	"context"
	"time"
)

// graces are the two grace periods of the cancellation ladder; zero skips
// a step.
type graces struct {
	interrupt time.Duration
	terminate time.Duration
}

// stopGraces returns the grace periods of a run or session stopped because
// ctx is done: Options.StopGraces's answer for the cancel's cause, if it
// gives one, else the Invoker's own.
func (c *config) stopGraces(ctx context.Context) graces {
	g := graces{interrupt: c.interruptGrace, terminate: c.terminateGrace}
	if c.choose == nil {
		return g
	}
	if i, t, ok := c.choose(context.Cause(ctx)); ok {
		g = graces{interrupt: max(i, 0), terminate: max(t, 0)}
	}
	return g
}
