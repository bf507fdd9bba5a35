package codex_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSessions runs the session cases on the codex backend, with the fake
// agent speaking Codex's app-server JSON-RPC.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Codex, codex.New)
}

// A thread Codex cannot resume fails OpenSession with Codex's reason, and
// the app-server it started is gone.
func TestSessionResumeUnknownThread(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Codex, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := codex.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env(), SessionID: "missing-thread"})
	var se *invoker.StreamError
	if sess != nil || !errors.As(err, &se) || !strings.Contains(err.Error(), "no rollout found") {
		t.Errorf("OpenSession() = %v, %v; want Codex's refusal as a *StreamError", sess, err)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived the refused session: %v", left)
	}
}

// The first-event timeout bounds the opening handshake of a server that
// does not answer.
func TestSessionHandshakeTimeout(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Codex, SilentFor: time.Hour, Tag: fakeagent.NewTag()}
	inv := codex.New(invoker.Options{Binary: os.Args[0], FirstEventTimeout: 200 * time.Millisecond, InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
	if sess != nil || !errors.Is(err, invoker.ErrFirstEventTimeout) {
		t.Errorf("OpenSession() = %v, %v; want ErrFirstEventTimeout", sess, err)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived the timed-out opening: %v", left)
	}
}

// A question Codex asks after turn/completed, while the session waits for
// the thread's background terminals to be cleaned, is declined without
// asking the program: the command does not run, even with a callback that
// allows everything.
func TestSessionQuestionAfterTurn(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/late"
	s := fakeagent.Script{Flavor: fakeagent.Codex, AskLate: "touch " + file, Tag: fakeagent.NewTag()}
	inv := codex.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	var asked []string
	res, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "p", Workdir: dir, Env: s.Env(), Permission: invoker.Unlimited,
		Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
			asked = append(asked, a.Command)
			return invoker.Decision{Allow: true}
		}})
	if err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	if len(asked) != 0 {
		t.Errorf("Approve was asked about %q after the turn completed", asked)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command asked about after the turn ran (stat: %v); answer %q", err, res.Text)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived: %v", left)
	}
}
