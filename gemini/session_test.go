package gemini_test

import (
	"testing"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/fakeagent"
	"github.com/clinvoke/clinvoke/internal/fakeagent/agenttest"
)

// TestSessions runs the session cases on the gemini backend, with the fake
// agent speaking the Agent Client Protocol.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Gemini, gemini.New)
}
