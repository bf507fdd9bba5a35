package mcpadapter

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

type sent struct {
	msg      string
	progress float64
	at       time.Duration
}

// recorder collects the notifications of a reporter, with their time
// since the start of the bubble.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	got   []sent
}

func (r *recorder) notify(_ context.Context, msg string, p float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, sent{msg, p, time.Since(r.start)})
	return nil
}

func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func TestReporterRateLimitAndHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		r := startReporter(t.Context(), rec.notify, 2*time.Second, 15*time.Second, nil)
		defer r.stop()

		check := func(when string, want ...sent) {
			t.Helper()
			synctest.Wait()
			got := rec.take()
			if len(got) != len(want) {
				t.Fatalf("%s: sent %v, want %v", when, got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s: notification %d = %+v, want %+v", when, i, got[i], want[i])
				}
			}
		}

		r.post("a")
		check("first message", sent{"a", 1, 0})

		// Within the interval, messages wait; the latest wins.
		r.post("b")
		r.post("c")
		check("within the interval")
		time.Sleep(2 * time.Second)
		check("after the interval", sent{"c", 2, 2 * time.Second})

		// Silence: a heartbeat every 15 s after the last notification,
		// naming the last message.
		time.Sleep(15 * time.Second)
		check("after 15 s of silence", sent{"still running (17s); last: c", 3, 17 * time.Second})
		time.Sleep(10 * time.Second)
		r.post("d") // at 27 s: more than 2 s after the heartbeat, sent at once
		check("a message after the heartbeat", sent{"d", 4, 27 * time.Second})
		time.Sleep(15 * time.Second)
		check("the next heartbeat counts from the last message", sent{"still running (42s); last: d", 5, 42 * time.Second})
	})
}

// TestReporterHeartbeatKeepsInterval checks that no two notifications,
// heartbeats included, go out less than the interval apart, also when the
// heartbeat is not longer than the interval.
func TestReporterHeartbeatKeepsInterval(t *testing.T) {
	for _, tc := range []struct {
		every, heartbeat time.Duration
	}{
		{20 * time.Second, 15 * time.Second}, // a heartbeat shorter than the interval
		{2 * time.Second, 2 * time.Second},   // both timers fire at once
		{2 * time.Second, 15 * time.Second},  // the defaults
	} {
		synctest.Test(t, func(t *testing.T) {
			rec := &recorder{start: time.Now()}
			r := startReporter(t.Context(), rec.notify, tc.every, tc.heartbeat, nil)
			defer r.stop()
			// A message, then one gated by the interval, then silence;
			// then a burst of messages at every second.
			r.post("a")
			time.Sleep(time.Second)
			r.post("b")
			time.Sleep(time.Minute)
			for i := range 30 {
				r.post(string(rune('c' + i%20)))
				time.Sleep(time.Second)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			got := rec.take()
			if len(got) < 3 || got[1].msg != "b" || got[1].at != tc.every {
				t.Errorf("every %v, heartbeat %v: sent %v; want a, then b after the interval", tc.every, tc.heartbeat, got)
			}
			for i := 1; i < len(got); i++ {
				if gap := got[i].at - got[i-1].at; gap < tc.every {
					t.Errorf("every %v, heartbeat %v: %q at %v only %v after %q; sent %v",
						tc.every, tc.heartbeat, got[i].msg, got[i].at, gap, got[i-1].msg, got)
				}
			}
			for i := range got {
				if strings.HasPrefix(got[i].msg, "still running") && i > 0 && got[i].at-got[i-1].at < max(tc.every, tc.heartbeat) {
					t.Errorf("every %v, heartbeat %v: heartbeat at %v after a notification at %v", tc.every, tc.heartbeat, got[i].at, got[i-1].at)
				}
			}
		})
	}
}

func TestReporterStopEndsSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		r := startReporter(t.Context(), rec.notify, time.Second, 5*time.Second, nil)
		r.post("a")
		r.post("b") // gated until 1 s
		synctest.Wait()
		r.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := rec.take(); len(got) != 1 {
			t.Errorf("sent %v, want only the message before stop", got)
		}
	})
}

func TestNilReporter(t *testing.T) {
	var r *reporter
	r.post("x") // no token: nothing happens
	r.stop()
	if startReporter(context.Background(), nil, time.Second, time.Second, nil) != nil {
		t.Error("startReporter(nil notify) != nil")
	}
}

func TestDescribe(t *testing.T) {
	tool := func(name, input string) invoker.Event {
		return invoker.Event{Kind: invoker.KindToolCall, Tool: &invoker.Tool{Name: name, Input: json.RawMessage(input)}}
	}
	for _, tc := range []struct {
		ev       invoker.Event
		streamed string
		want     string
	}{
		{tool("command_execution", `{"command":"/bin/bash -lc 'echo hello'"}`), "", "running: /bin/bash -lc 'echo hello'"},
		{tool("Bash", `{"command":"go test ./...","description":"run tests"}`), "", "running: go test ./..."},
		{tool("shell", `{"command":["bash","-lc","ls"]}`), "", "running: bash -lc ls"},
		{tool("Read", `{"file_path":"/src/main.go"}`), "", "Read: /src/main.go"},
		{tool("web_search", `"not an object"`), "", "web_search"},
		{invoker.Event{Kind: invoker.KindReasoning, Text: "  Let me\nlook  "}, "", "thinking… Let me look"},
		{invoker.Event{Kind: invoker.KindMessage, Text: "Done."}, "", "message: Done."},
		{invoker.Event{Kind: invoker.KindDelta, Text: "lo", Delta: invoker.KindMessage}, "hello", "writing: hello"},
		{invoker.Event{Kind: invoker.KindSession, SessionID: "s1"}, "", "session s1"},
		{invoker.Event{Kind: invoker.KindUsage}, "", ""},
		{invoker.Event{Kind: invoker.KindRaw}, "", ""},
		{invoker.Event{Kind: invoker.KindQueued, Ahead: 3, Text: "queued: 3 ahead"}, "", "queued, 3 ahead"},
		{invoker.Event{Kind: invoker.KindQueued, RateLimit: &invoker.RateLimit{ResetsAt: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}}, "",
			"queued, 0 ahead, until the rate limit resets at 2026-11-28T12:00:00Z"},
	} {
		if got := describe(tc.ev, tc.streamed); got != tc.want {
			t.Errorf("describe(%v %s) = %q, want %q", tc.ev.Kind, tc.ev.Text, got, tc.want)
		}
	}
	long := strings.Repeat("x", 500)
	if got := describe(invoker.Event{Kind: invoker.KindMessage, Text: long}, ""); len([]rune(got)) > maxSnippet+len("message: ") {
		t.Errorf("a long message gives a %d-rune progress message", len([]rune(got)))
	}
}

func TestObserverPartial(t *testing.T) {
	o := &observer{}
	o.onEvent(invoker.Event{Kind: invoker.KindSession, SessionID: "s1"})
	o.onEvent(invoker.Event{Kind: invoker.KindMessage, Text: "first whole message"})
	o.onEvent(invoker.Event{Kind: invoker.KindDelta, Text: "Hel", Delta: invoker.KindMessage})
	o.onEvent(invoker.Event{Kind: invoker.KindDelta, Text: "lo", Delta: invoker.KindMessage})
	if sid, text := o.partial(); sid != "s1" || text != "Hello" {
		t.Errorf("partial() = %q, %q; want s1, Hello", sid, text)
	}
}
