package claude_test

import (
	"testing"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
)

// TestSessions runs the session cases on the claude backend, with the fake
// agent speaking Claude Code's stream-json input and control requests.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Claude, claude.New)
}
