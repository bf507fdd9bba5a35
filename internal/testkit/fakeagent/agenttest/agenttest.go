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
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// Factory returns a factory for invokertest.Run: each case gets an Invoker
// from newInvoker that runs the test binary as a fake agent of flavor
// scripted after the case's Fake, with a short cancellation ladder.
func Factory(flavor string, newInvoker func(...invoker.Options) invoker.Invoker) func(*testing.T, invokertest.Fake) invoker.Invoker {
	return func(t *testing.T, f invokertest.Fake) invoker.Invoker {
		s := Script(flavor, f)
		s.RecordDir = t.TempDir()
		opts := []invoker.Options{
			invoker.Options{Binary: os.Args[0], Env: s.Env(), InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond},
		}
		if f.AnswerOverLimit {
			opts = append(opts, invoker.Options{MaxLineSize: lineLimit})
		}
		return newInvoker(opts...)
	}
}

// lineLimit is the line limit of a case whose answer must exceed it: the
// smallest invoker.Options.MaxLineSize allows, so the fake prints little.
const lineLimit = 64 << 10

// Script translates a conformance Fake into a fake agent Script.
func Script(flavor string, f invokertest.Fake) fakeagent.Script {
	s := fakeagent.Script{
		Flavor:     flavor,
		SessionID:  f.SessionID,
		Answer:     f.Answer,
		Grandchild: f.Grandchild,
		Escapee:    f.Escapee,
		Fail:       f.Fail,
		Stderr:     f.Stderr,
		ExitCode:   f.ExitCode,
		NoTerminal: f.ExitCode != 0,
		HugeLine:   f.HugeLine,
		Tool:       f.Tool,
		Tag:        fakeagent.NewTag(),
	}
	if f.AnswerOverLimit {
		s.AnswerSize = 2 * lineLimit
	}
	s.Ask, s.AskCount, s.Edit, s.CallTool = f.Ask, f.AskCount, f.Edit, f.CallTool
	if f.ToolArgs != nil {
		b, err := json.Marshal(f.ToolArgs)
		if err != nil {
			panic("agenttest: Fake.ToolArgs: " + err.Error())
		}
		s.ToolArgs = b
	}
	if f.Stream {
		// Part of the answer, then a model that never finishes the turn.
		s.Chunks = 3
		s.StallFor = 10 * time.Minute
	}
	return s
}
