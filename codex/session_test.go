package codex_test

import (
	"testing"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/fakeagent"
	"github.com/clinvoke/clinvoke/internal/fakeagent/agenttest"
)

// TestSessions runs the session cases on the codex backend, with the fake
// agent speaking Codex's app-server JSON-RPC.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Codex, codex.New)
}
