package claude_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the test binary doubles as a fake claude CLI
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// TestConformance runs the invoker contract on the claude backend, with the fake
// agent speaking claude's real stream format in place of the CLI.
func TestConformance(t *testing.T) {
	invokertest.Run(t, agenttest.Factory(fakeagent.Claude, claude.New))
}

// TestConfigHomeFromOptions checks that the ceiling sees a configuration
// home set only in invoker.Options.Env.
func TestConfigHomeFromOptions(t *testing.T) {
	agenttest.CheckConfigHomeFromOptions(t, fakeagent.Claude, claude.New)
}
