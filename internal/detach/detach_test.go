package detach

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type key struct{}

// A Context keeps the context package's contract although its owner, not
// its deadline, cancels it: Err says DeadlineExceeded when the deadline is
// why, and so do the contexts derived from it.
func TestErr(t *testing.T) {
	past := time.Now().Add(-time.Second)
	future := time.Now().Add(time.Hour)
	stopped := fmt.Errorf("interrupted: %w", context.DeadlineExceeded)
	idle := errors.New("idle timeout")
	over := errors.New("the turn is over")
	for _, tc := range []struct {
		name     string
		deadline time.Time // zero for none
		cause    error
		want     error
	}{
		{"for the deadline", future, stopped, context.DeadlineExceeded},
		{"for another reason", future, idle, context.Canceled},
		{"a cancel", time.Time{}, context.Canceled, context.Canceled},
		{"nil cause", time.Time{}, nil, context.Canceled},
		{"after the deadline passed", past, over, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := context.WithValue(context.Background(), key{}, "v")
			if !tc.deadline.IsZero() {
				var cancel context.CancelFunc
				parent, cancel = context.WithDeadline(parent, tc.deadline)
				defer cancel()
			}
			c := New(parent)
			if c.Value(key{}) != "v" {
				t.Errorf("Value = %v, want the parent's", c.Value(key{}))
			}
			if d, ok := c.Deadline(); ok != !tc.deadline.IsZero() || !d.Equal(tc.deadline) {
				t.Errorf("Deadline() = %v, %v; want the parent's %v", d, ok, tc.deadline)
			}
			if parent.Err() != nil && c.Err() != nil {
				t.Fatalf("done with its parent: Err() = %v", c.Err())
			}
			child, stop := context.WithCancel(c)
			defer stop()
			timed, stopTimed := context.WithTimeout(c, time.Hour)
			defer stopTimed()
			ran := make(chan error, 1)
			context.AfterFunc(c, func() { ran <- c.Err() })

			c.Cancel(tc.cause)
			wantCause := tc.cause
			if wantCause == nil {
				wantCause = tc.want
			}
			for _, x := range []struct {
				name string
				ctx  context.Context
			}{{"Context", c}, {"WithCancel child", child}, {"WithTimeout child", timed}} {
				<-x.ctx.Done()
				if err := x.ctx.Err(); err != tc.want {
					t.Errorf("%s: Err() = %v, want %v", x.name, err, tc.want)
				}
				if cause := context.Cause(x.ctx); cause != wantCause {
					t.Errorf("%s: context.Cause = %v, want %v", x.name, cause, wantCause)
				}
			}
			if err := <-ran; err != tc.want {
				t.Errorf("an AfterFunc saw Err() = %v, want %v", err, tc.want)
			}
			c.Cancel(errors.New("again"))
			if c.Err() != tc.want || context.Cause(c) != wantCause {
				t.Errorf("a second Cancel changed Err, Cause to %v, %v", c.Err(), context.Cause(c))
			}
		})
	}
}

// The contexts derived from a Context, and the functions waiting for it,
// cost no goroutine each (a Context that is not the context package's own
// costs one, unless it has an AfterFunc method).
func TestDerivedWithoutGoroutines(t *testing.T) {
	c := New(context.Background())
	before := runtime.NumGoroutine()
	var stops []func()
	for range 100 {
		_, cancel := context.WithCancel(c)
		stop := context.AfterFunc(c, func() {})
		stops = append(stops, cancel, func() { stop() })
	}
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Errorf("100 derived contexts and 100 AfterFuncs started %d goroutines, want none", n)
	}
	for _, stop := range stops {
		stop()
	}
	c.Cancel(nil)
}
