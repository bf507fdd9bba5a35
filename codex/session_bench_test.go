package codex_test

import (
	"testing"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
)

// BenchmarkSession compares a warm session turn with a cold Invoke, and
// the in-protocol interrupt with a cancelled Invoke, on the fake agent.
func BenchmarkSession(b *testing.B) {
	agenttest.BenchSessions(b, fakeagent.Codex, codex.New)
}
