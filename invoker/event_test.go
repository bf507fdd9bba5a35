package invoker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// Every kind, and a value without a name, survives JSON and text.
func TestEventKindRoundTrip(t *testing.T) {
	kinds := []invoker.EventKind{
		invoker.KindSession, invoker.KindMessage, invoker.KindReasoning, invoker.KindToolCall,
		invoker.KindToolResult, invoker.KindUsage, invoker.KindWarning, invoker.KindError,
		invoker.KindDone, invoker.KindRaw, invoker.EventKind(0), invoker.EventKind(42),
	}
	for _, k := range kinds {
		b, err := json.Marshal(invoker.Event{Kind: k, Text: "x"})
		if err != nil {
			t.Fatalf("json.Marshal(Event{Kind: %v}) error = %v", k, err)
		}
		var ev invoker.Event
		if err := json.Unmarshal(b, &ev); err != nil || ev.Kind != k {
			t.Errorf("json.Unmarshal(%s) = Kind %v, error %v; want %v, nil", b, ev.Kind, err, k)
		}
		text, _ := k.MarshalText()
		var got invoker.EventKind
		if err := got.UnmarshalText(text); err != nil || got != k {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, nil", text, got, err, k)
		}
	}
	if got := string(must(invoker.KindToolCall.MarshalText())); got != "tool_call" {
		t.Errorf("KindToolCall.MarshalText() = %q, want tool_call", got)
	}
	for _, bad := range []string{"", "Message", "tool-call", "EventKind(x)", "EventKind(1"} {
		k := invoker.KindDone
		err := k.UnmarshalText([]byte(bad))
		if err == nil || k != invoker.KindDone {
			t.Errorf("UnmarshalText(%q) = %v, kind %v; want an error and the kind unchanged", bad, err, k)
		} else if !strings.Contains(err.Error(), "tool_call") {
			t.Errorf("UnmarshalText(%q) error = %q, want it to list the valid names", bad, err)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

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
