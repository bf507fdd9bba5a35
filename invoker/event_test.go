package invoker_test

import (
	"encoding/json"
	"strings"
	"testing"

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
