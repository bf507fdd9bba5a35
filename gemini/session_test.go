package gemini_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSessions runs the session cases on the gemini backend, with the fake
// agent speaking the Agent Client Protocol.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Gemini, gemini.New)
}

// A session Gemini cannot set up fails OpenSession with Gemini's reason,
// although Gemini exits 0 on the SIGINT that stops it, and the tree is
// gone.
func TestSessionSetupRefused(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Gemini, Fail: "API key not valid. Please pass a valid API key.", Tag: fakeagent.NewTag()}
	inv := gemini.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
	if sess != nil || !errors.Is(err, invoker.ErrAuthRequired) || !strings.Contains(err.Error(), "API key not valid") {
		t.Errorf("OpenSession() = %v, %v; want Gemini's refusal, matching ErrAuthRequired", sess, err)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived the refused session: %v", left)
	}
}

// Gemini 0.61.0's session/load does not load a saved conversation
// reliably (e2e's TestGeminiSessionLoadProbe): a session cannot resume
// one, and says so before anything starts.
func TestSessionResumeUnsupported(t *testing.T) {
	_, err := gemini.New(invoker.Options{Binary: os.Args[0]}).OpenSession(context.Background(),
		invoker.SessionRequest{Workdir: t.TempDir(), SessionID: "e05ea907-9109-4d6b-abcd-457256231577"})
	if !errors.Is(err, invoker.ErrUnsupported) || !strings.Contains(err.Error(), "Invoke") {
		t.Errorf("OpenSession(SessionID) error = %v, want ErrUnsupported pointing to Invoke", err)
	}
}
