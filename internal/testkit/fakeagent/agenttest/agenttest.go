// Package agenttest runs the conformance suite of invoker/invokertest on a
// backend of this module, with the fake agent (internal/testkit/fakeagent) playing
// the backend's CLI.
//
// The test binary doubles as the CLI, so the backend's TestMain must hand
// over to the fake first:
//
//	func TestMain(m *testing.M) {
//		fakeagent.Main()
//		goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
//	}
//
//	func TestConformance(t *testing.T) {
//		invokertest.Run(t, agenttest.Factory(fakeagent.Codex, codex.New))
//	}
package agenttest

import (
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// Factory returns a factory for invokertest.Run: each case gets an Invoker
// from newInvoker that runs the test binary as a fake agent of flavor
// scripted after the case's Fake, with a short cancellation ladder. The
// Fake goes the way a user's does, through invokertest's Agent
// (Fake.Agent, Agent.Options): the one translation of a scripted agent
// into the fake.
func Factory(flavor string, newInvoker func(...invoker.Options) invoker.Invoker) func(*testing.T, invokertest.Fake) invoker.Invoker {
	return func(t *testing.T, f invokertest.Fake) invoker.Invoker {
		a, opts := f.Agent(flavor)
		return newInvoker(a.Options(), opts,
			invoker.Options{InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond})
	}
}
