package mcpadapter_test

import (
	"context"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestForkArgument: fork next to session_id reaches the Request, a fork
// without a session to copy is refused before anything starts, and a CLI
// that cannot fork offers no fork argument.
func TestForkArgument(t *testing.T) {
	inv := answer("codex")
	plain := capStub{answer("gemini"), invoker.Capabilities{Resume: true, Sessions: true}}
	h := newHarness(t, nil, inv, plain)
	dir := t.TempDir()

	if res := h.call(context.Background(), t, "codex", args("go on", dir, "session_id", testSessionID, "fork", true), nil); res.IsError {
		t.Fatalf("fork with session_id: IsError, content %v", res.Content)
	}
	if req := inv.lastRequest(t); !req.Fork || req.SessionID != testSessionID {
		t.Errorf("Request = Fork %v, SessionID %q; want true, %q", req.Fork, req.SessionID, testSessionID)
	}
	n := inv.calls.Load()
	if res := h.call(context.Background(), t, "codex", args("go on", dir, "fork", true), nil); !res.IsError || inv.calls.Load() != n {
		t.Errorf("fork without session_id: IsError %v, invoker called %v; want refused without starting", res.IsError, inv.calls.Load() != n)
	}

	tools, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		var in struct {
			Properties map[string]any `json:"properties"`
		}
		remarshal(t, tl.InputSchema, &in)
		_, has := in.Properties["fork"]
		if want := tl.Name == "codex"; has != want {
			t.Errorf("tool %s: fork argument offered %v, want %v (only CLIs that fork)", tl.Name, has, want)
		}
	}
	if res := h.call(context.Background(), t, "gemini", args("go on", dir, "session_id", testSessionID, "fork", true), nil); !res.IsError {
		t.Errorf("fork on a CLI that cannot fork: IsError = false, want refused")
	}
}

// TestDeltasOption: Options.Deltas asks for deltas only of CLIs that
// stream them.
func TestDeltasOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		streams := capStub{answer("claude"), invoker.Capabilities{Deltas: true}}
		whole := capStub{answer("gemini"), invoker.Capabilities{}}
		h := newHarness(t, &mcpadapter.Options{Deltas: on}, streams, whole)
		dir := t.TempDir()
		for _, name := range []string{"claude", "gemini"} {
			if res := h.call(context.Background(), t, name, args("hi", dir), nil); res.IsError {
				t.Fatalf("%s: IsError, content %v", name, res.Content)
			}
		}
		if got := streams.lastRequest(t).Deltas; got != on {
			t.Errorf("Options.Deltas %v: a streaming CLI's Request.Deltas = %v", on, got)
		}
		if whole.lastRequest(t).Deltas {
			t.Errorf("Options.Deltas %v: a CLI without deltas was asked for them", on)
		}
	}
}
