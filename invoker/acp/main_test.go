package acp_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// TestMain runs the fake agent (of the ACP flavour, or, for the examples,
// invokertest's; or the MCP server of TestMCPServers) when the test binary
// is started as one, and fails the run if a
// process of a fake or a goroutine outlives the tests.
func TestMain(m *testing.M) {
	if os.Getenv(envMCPEcho) != "" {
		mcpEcho()
		os.Exit(0)
	}
	fakeagent.Main()
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// fakeAgent returns the Agent that runs the test binary as the fake agent
// s, of the ACP flavour.
func fakeAgent(s fakeagent.Script) acp.Agent {
	s.Flavor = fakeagent.ACP
	// "--acp" is a flag the test binary refuses: started without the
	// fake's script it exits at once instead of running the tests again.
	return acp.Agent{Name: "fakeacp", Command: []string{os.Args[0], "--acp"}, Env: s.Env()}
}

// quick are options with a short ladder, for fakes that must be stopped.
var quick = invoker.Options{InterruptGrace: 300e6, TerminateGrace: 300e6, TurnInterruptGrace: 2e9}

// assertGone fails t if a process of the fake tagged tag is alive.
func assertGone(t *testing.T, tag string) {
	t.Helper()
	if left := fakeagent.Survivors(tag); len(left) > 0 {
		t.Errorf("processes of the fake alive after the call returned: %v", left)
	}
}
