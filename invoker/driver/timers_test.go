package driver

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// fakeActivity is a CLI as the timers see it: silent since its last
// output, or waiting for the program while an Approve callback decides.
type fakeActivity struct {
	last       time.Time
	isDeciding bool
}

func (a *fakeActivity) quiet() time.Duration { return time.Since(a.last) }
func (a *fakeActivity) deciding() bool       { return a.isDeciding }

// fired waits for c and returns how long that took on the bubble's clock.
func fired(c <-chan time.Time) time.Duration {
	start := time.Now()
	<-c
	return time.Since(start)
}

// The first-event timeout fires at its duration when no event came, is
// no error when the event came meanwhile, and starts again while the CLI
// waits for an Approve callback.
func TestFirstEventTimeout(t *testing.T) {
	tests := []struct {
		name     string
		event    bool // the turn's first event came before the timer fired
		deciding bool
		want     error
	}{
		{name: "no event", want: invoker.ErrFirstEventTimeout},
		{name: "event came", event: true},
		{name: "deciding", deciding: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &fakeActivity{last: time.Now(), isDeciding: tt.deciding}
				tm := newTurnTimers(time.Second, 0, a)
				defer tm.stop()
				first := make(chan struct{})
				if tt.event {
					close(first)
				}
				if d := fired(tm.firstC); d != time.Second {
					t.Fatalf("the first-event timer fired after %v, want 1s", d)
				}
				err := tm.firstDue(first)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("firstDue() = %v, want %v", err, tt.want)
				}
				switch {
				case tt.deciding:
					if d := fired(tm.firstC); d != time.Second {
						t.Errorf("while deciding, the timer fired again after %v, want a full 1s", d)
					}
				case tm.firstC != nil:
					t.Errorf("after firstDue() = %v the timer is still armed", err)
				}
			})
		})
	}
}

// The idle timeout counts from the CLI's last output: a timer that fires
// early (output came meanwhile) is set for the rest, and waiting for an
// Approve callback is not silence.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeActivity{last: time.Now()}
		tm := newTurnTimers(0, 10*time.Second, a)
		defer tm.stop()
		if tm.firstC != nil {
			t.Fatal("a first-event timer without FirstEventTimeout")
		}

		time.Sleep(4 * time.Second)
		a.last = time.Now() // output at 4s
		if d := fired(tm.idleC); d != 6*time.Second {
			t.Fatalf("the idle timer fired after %v more, want 6s (at 10s)", d)
		}
		if err := tm.idleDue(); err != nil {
			t.Fatalf("idleDue() at 6s of silence = %v, want nil", err)
		}
		if d := fired(tm.idleC); d != 4*time.Second {
			t.Fatalf("the idle timer fired again after %v, want the 4s of silence left", d)
		}
		a.isDeciding = true
		if err := tm.idleDue(); err != nil {
			t.Fatalf("idleDue() while deciding = %v, want nil", err)
		}
		if d := fired(tm.idleC); d != 10*time.Second {
			t.Fatalf("while deciding, the idle timer fired after %v, want a full 10s", d)
		}
		a.isDeciding = false
		if err := tm.idleDue(); !errors.Is(err, invoker.ErrIdleTimeout) {
			t.Fatalf("idleDue() after 20s of silence = %v, want ErrIdleTimeout", err)
		}
		if tm.idleC != nil {
			t.Error("the idle timer is still armed after its timeout")
		}
	})
}

// stop disarms both timers: neither fires after.
func TestTurnTimersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTurnTimers(time.Second, time.Second, &fakeActivity{last: time.Now()})
		tm.stop()
		if tm.firstC != nil || tm.idleC != nil {
			t.Fatal("stop left a timer armed")
		}
		time.Sleep(time.Minute)
		for _, tmr := range []*time.Timer{tm.first, tm.idleT} {
			select {
			case <-tmr.C:
				t.Error("a stopped timer fired")
			default:
			}
		}
	})
}
