package mcpadapter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

func TestWarmSessionsOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		warm mcpadapter.WarmSessions
		want string
	}{
		{mcpadapter.WarmSessions{MaxSessions: -1}, "Options.WarmSessions: MaxSessions is -1"},
		{mcpadapter.WarmSessions{MaxSessions: 2, IdleTimeout: -time.Second}, "Options.WarmSessions: IdleTimeout is -1s"},
	} {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
		_, err := mcpadapter.Register(s, &mcpadapter.Options{WarmSessions: tc.warm}, answer("codex"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%+v) error = %v, want one saying %q", tc.warm, err, tc.want)
		}
	}
}

// An invoker that cannot open sessions (here a stub with Invoke only)
// runs every call cold when warm sessions are on, session_id included.
func TestWarmSessionsWithoutSessionerRunCold(t *testing.T) {
	inv := answer("codex")
	h := newHarness(t, &mcpadapter.Options{WarmSessions: mcpadapter.WarmSessions{MaxSessions: 2}}, inv)
	id := "5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e18"
	for range 2 {
		var out mcpadapter.Output
		h.call(context.Background(), t, "codex", args("hi", t.TempDir(), "session_id", id), &out)
		if out.Status != mcpadapter.StatusCompleted || out.Text != "echo: hi" {
			t.Errorf("output %+v, want the invoker's answer", out)
		}
	}
	if n := inv.calls.Load(); n != 2 {
		t.Errorf("Invoke called %d times, want 2", n)
	}
}
