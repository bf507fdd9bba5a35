// Package detach makes contexts that keep the values and the deadline of a
// parent but not its cancellation: their owner cancels them, when it is
// ready to, and their Err still keeps the promise of package context.
//
// The engine gives such a context to the callbacks of a turn (Approve, Go
// tool handlers): they must see the deadline and the values of the context
// the turn was given, but be cancelled only once the CLI has been asked to
// end the turn, so that an answer they give on cancellation cannot complete
// the turn as if nothing had happened. Built from the context package's own
// constructors such a context would break the contract one way or the
// other: one cancelled by a CancelFunc reports context.Canceled, even once
// its deadline has passed, and one with a deadline of its own is done at
// the deadline, before the CLI was asked to stop.
package detach

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A Context has the values and the deadline of its parent and is done
// when Cancel is called, not when the parent is. Once done, Err returns
// context.DeadlineExceeded when it was cancelled for its deadline (the
// cause says so, or the deadline had passed), else context.Canceled, and
// context.Cause returns the cause given to Cancel. The contexts derived
// from it (context.WithCancel, WithTimeout, ...) report the same error
// and cause, and cost no goroutine each, as those derived from the
// context package's own contexts. Its methods are safe for concurrent use.
type Context struct {
	// cause holds the values, the deadline and the cause. done, its
	// child, gives the Context its Done channel: as it is not the channel
	// of the context holding the cause, the context package does not
	// take cause's error (Canceled) for the Context's, but asks Err,
	// through the AfterFunc method.
	cause       context.Context
	cancelCause context.CancelCauseFunc
	done        context.Context
	cancelDone  context.CancelFunc
	err         atomic.Pointer[error] // set before cause is cancelled
}

// New returns a Context with the values and the deadline of parent.
func New(parent context.Context) *Context {
	c := &Context{}
	c.cause, c.cancelCause = context.WithCancelCause(detached{context.WithoutCancel(parent), parent})
	c.done, c.cancelDone = context.WithCancel(c.cause)
	return c
}

// Cancel cancels the Context with cause (nil meaning context.Canceled).
// Only the first call has an effect; Cancel is a context.CancelCauseFunc.
func (c *Context) Cancel(cause error) {
	err := context.Canceled
	if d, ok := c.Deadline(); errors.Is(cause, context.DeadlineExceeded) || ok && !time.Now().Before(d) {
		err = context.DeadlineExceeded
	}
	if cause == nil {
		cause = err
	}
	c.err.CompareAndSwap(nil, &err)
	c.cancelCause(cause)
	c.cancelDone()
}

// Deadline returns the parent's deadline.
func (c *Context) Deadline() (time.Time, bool) { return c.cause.Deadline() }

// Done returns a channel that is closed when the Context is cancelled.
func (c *Context) Done() <-chan struct{} { return c.done.Done() }

// Value returns the parent's value for key.
func (c *Context) Value(key any) any { return c.cause.Value(key) }

// Err returns nil until the Context is cancelled, then
// context.DeadlineExceeded or context.Canceled, as Cancel found.
func (c *Context) Err() error {
	if c.done.Err() == nil {
		return nil
	}
	return *c.err.Load()
}

// AfterFunc arranges for f to run on a goroutine of its own once the
// Context is done, as context.AfterFunc does, which uses it: a function
// waiting for the Context costs no goroutine until then.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.done, f)
}

func (c *Context) String() string { return "detach.Context" }

// detached is a context with the values and the deadline of parent but
// not its cancellation (context.WithoutCancel drops the deadline too).
type detached struct {
	context.Context // context.WithoutCancel(parent)
	parent          context.Context
}

func (d detached) Deadline() (time.Time, bool) { return d.parent.Deadline() }
