package gemini_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the test binary doubles as a fake gemini CLI
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// TestConformance runs the invoker contract on the gemini backend, with the fake
// agent speaking gemini's real stream format in place of the CLI.
func TestConformance(t *testing.T) {
	newInvoker := agenttest.Factory(fakeagent.Gemini, gemini.New)
	invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker { return newInvoker(t, f) })
}

// TestConfigHomeFromOptions checks that the ceiling sees a configuration
// home set only in invoker.Options.Env.
func TestConfigHomeFromOptions(t *testing.T) {
	agenttest.CheckConfigHomeFromOptions(t, fakeagent.Gemini, gemini.New)
}
