//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// A liveCLI holds one CLI's scenarios of live turns: text as it is
// written, steering, switches between turns, forks and rate limits. Each
// CLI's file (live_<cli>_test.go) registers its own in live; a scenario
// the CLI cannot play asserts the typed refusal instead.
type liveCLI struct {
	delta, steer, switchModel, switchPermission, fork, rateLimit func(t *testing.T, r *rig)
}

// live maps a CLI's name to its scenarios.
var live = map[string]*liveCLI{}

// forEachLive runs the scenario pick chooses for every CLI, on a fresh rig.
func forEachLive(t *testing.T, pick func(*liveCLI) func(*testing.T, *rig)) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		l := live[r.cli.name]
		if l == nil || pick(l) == nil {
			t.Fatalf("no scenario for %s: register it in live_%s_test.go", r.cli.name, r.cli.name)
		}
		pick(l)(t, r)
	})
}

func TestDelta(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.delta })
}

func TestSteer(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.steer })
}

func TestSwitchModel(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.switchModel })
}

func TestSwitchPermission(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.switchPermission })
}

func TestFork(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.fork })
}

func TestRateLimit(t *testing.T) {
	forEachLive(t, func(l *liveCLI) func(*testing.T, *rig) { return l.rateLimit })
}

// longAnswer is an answer of many words; paced at deltaPace, the fake model
// streams it over several seconds.
var longAnswer = strings.Repeat("streaming words arrive one by one ", 25)

const deltaPace = 40 * time.Millisecond

// checkDeltas checks what a turn that asked for deltas received: KindDelta
// events of the message, the first one well before the whole message (at
// least half the stream's pacing earlier), and the whole message after
// them, equal to the deltas joined.
func checkDeltas(t *testing.T, evs []timedEvent, want string) {
	t.Helper()
	var first, whole time.Time
	var joined strings.Builder
	for _, e := range evs {
		switch {
		case e.ev.Kind == invoker.KindDelta && e.ev.Delta == invoker.KindMessage:
			if first.IsZero() {
				first = e.at
			}
			if !whole.IsZero() {
				t.Errorf("a delta came after the whole message: %q", e.ev.Text)
			}
			joined.WriteString(e.ev.Text)
		case e.ev.Kind == invoker.KindMessage && strings.TrimSpace(e.ev.Text) != "":
			whole = e.at
			if got := strings.TrimSpace(e.ev.Text); got != strings.TrimSpace(want) {
				t.Errorf("whole message = %q, want %q", got, want)
			}
		}
	}
	if first.IsZero() || whole.IsZero() {
		t.Fatalf("want deltas and then the whole message; got first delta %v, whole message %v", !first.IsZero(), !whole.IsZero())
	}
	if got := strings.TrimSpace(joined.String()); got != strings.TrimSpace(want) {
		t.Errorf("deltas joined = %q, want the answer %q", got, want)
	}
	words := len(strings.Fields(want))
	if lead := whole.Sub(first); lead < time.Duration(words/2)*deltaPace {
		t.Errorf("first delta only %v before the whole message; the answer streams over %v", lead, time.Duration(words)*deltaPace)
	}
}

// A timedEvent is an event and when OnEvent received it.
type timedEvent struct {
	ev invoker.Event
	at time.Time
}

// recordEvents returns an OnEvent that records events with their time, and
// a function that returns those recorded so far.
func recordEvents() (func(invoker.Event), func() []timedEvent) {
	ch := make(chan timedEvent, 4096)
	var got []timedEvent
	return func(ev invoker.Event) { ch <- timedEvent{ev, time.Now()} }, func() []timedEvent {
		for {
			select {
			case e := <-ch:
				got = append(got, e)
			default:
				return got
			}
		}
	}
}

// pacedAnswer is the fake model's turn for the delta scenarios.
func pacedAnswer() fakemodel.Turn { return fakemodel.Turn{Text: longAnswer, Pace: deltaPace} }

// TestCancelAtStartup cancels a run, and a session's opening, while the CLI
// is starting (its process runs, it has printed nothing yet, no model
// request was made), and checks that the call returns the context's error
// promptly with nothing left.
func TestCancelAtStartup(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		started := func() bool { return len(r.survivors()) > 0 }
		t.Run("invoke", func(t *testing.T) {
			r.srv.Enqueue(fakemodel.Answer("too late"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var events []invoker.Event
			req := r.request("say hi")
			req.OnEvent = func(ev invoker.Event) { events = append(events, ev) }
			at := cancelAt(ctx, cancel, started)
			res, err := r.invoke(ctx, req)
			checkStartupCancel(t, r, at, err, res != nil && res.Containment != "")
			for _, ev := range events {
				if ev.Kind != invoker.KindWarning && ev.Kind != invoker.KindSession {
					t.Errorf("an event came before the cancel took effect: %v %q (the cancel was not at start-up)", ev.Kind, ev.Text)
				}
			}
		})
		t.Run("session", func(t *testing.T) {
			if !r.inv.Capabilities().Sessions {
				t.Fatalf("%s declares no sessions", r.cli.name)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			at := cancelAt(ctx, cancel, started)
			req := r.request("")
			s, err := r.inv.OpenSession(ctx, req.Session())
			if err == nil {
				// The handshake won the race; the session's context still
				// stops it.
				<-s.Done()
				err = s.Err()
				if cerr := s.Close(); !errors.Is(cerr, context.Canceled) {
					t.Errorf("Close() after the cancel = %v, want context.Canceled", cerr)
				}
			}
			if ps := r.survivors(); len(ps) > 0 {
				t.Errorf("processes of the session alive after it ended:\n%s", strings.Join(ps, "\n"))
			}
			checkStartupCancel(t, r, at, err, true)
		})
	})
}

// cancelAt cancels ctx once started reports true, and returns a channel
// that receives the time of the cancel.
func cancelAt(ctx context.Context, cancel context.CancelFunc, started func() bool) <-chan time.Time {
	fired := make(chan time.Time, 1)
	go func() {
		for !started() {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		fired <- time.Now()
		cancel()
	}()
	return fired
}

// checkStartupCancel checks a call cancelled at start-up: it returned the
// context's error, within quick of the cancel, before the CLI made a model
// request.
func checkStartupCancel(t *testing.T, r *rig, fired <-chan time.Time, err error, started bool) {
	t.Helper()
	var at time.Time
	select {
	case at = <-fired:
	default:
		t.Fatalf("the call returned before the CLI started (no cancel): %v", err)
	}
	if stop := time.Since(at); stop > quick {
		t.Errorf("the call took %v to return after the cancel, want less than %v", stop, quick)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if !started {
		t.Errorf("the result names no containment level: no process was started")
	}
	if n := len(r.srv.Requests()); n > 0 {
		t.Logf("the CLI made %d model request(s) before the cancel took effect", n)
	}
}

// modelOf returns the "model" field of a model request.
func modelOf(t *testing.T, req fakemodel.Request) string {
	t.Helper()
	var b struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(req.Body, &b); err != nil {
		t.Fatalf("model request body: %v", err)
	}
	return b.Model
}
