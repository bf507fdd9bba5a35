package gemini_test

import (
	"context"
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
	invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
		inv := newInvoker(t, f)
		if f.Stream {
			return streamed{inv}
		}
		return inv
	})
}

// streamed shows the suite's cancel cases the text Gemini streams. They
// cancel a run once a KindMessage arrives, and a message that never ends
// (Fake.Stream) now comes only as deltas, its whole KindMessage following
// at its end: streamed asks for the deltas and hands them on as the
// messages they were before deltas had a kind of their own. The run, its
// cancel and its result are the backend's own.
type streamed struct{ invoker.Invoker }

func (s streamed) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if on := req.OnEvent; on != nil {
		req.Deltas = true
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindDelta && ev.Delta == invoker.KindMessage {
				ev.Kind, ev.Delta = invoker.KindMessage, 0
			}
			on(ev)
		}
	}
	return s.Invoker.Invoke(ctx, req)
}
