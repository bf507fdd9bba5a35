package driver_test

import (
	"context"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// Once the CLI reported its session, every event carries the session id,
// whatever the backend's decoder set.
func TestEveryEventCarriesTheSession(t *testing.T) {
	f := newFixture(t, fakeagent.Script{SessionID: "thread-ev", Chunks: 2, Tool: true, StreamFor: 1})
	var events []invoker.Event
	f.req.OnEvent = func(ev invoker.Event) { events = append(events, ev) }
	if _, err := f.inv.Invoke(context.Background(), f.req); err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	if len(events) < 4 || events[0].Kind != invoker.KindSession {
		t.Fatalf("events = %v, want the session first and more after", kindsOf(events))
	}
	for _, ev := range events {
		if ev.SessionID != "thread-ev" {
			t.Errorf("%v event has SessionID %q, want thread-ev", ev.Kind, ev.SessionID)
		}
	}
	f.assertReaped(1)
}

func kindsOf(evs []invoker.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Kind.String())
	}
	return out
}
