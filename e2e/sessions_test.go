//go:build e2e

package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// forEachSessionCLI runs f for every CLI whose backend declares sessions,
// with a session opened on a fresh rig (see forEachSession).
func forEachSessionCLI(t *testing.T, f func(t *testing.T, r *rig, s invoker.Session)) {
	forEachSession(t, clis, "", f)
}

// forEachSessionRig runs f as one subtest per CLI of cs, each with a fresh
// rig. A CLI without sessions at the pinned version is skipped, naming the
// reason; a missing CLI fails under CI=true as everywhere in this package.
func forEachSessionRig(t *testing.T, cs []cli, f func(t *testing.T, r *rig)) {
	forEachRig(t, cs, func(t *testing.T, r *rig) {
		if !r.inv.Capabilities().Sessions {
			t.Skipf("%s declares no sessions at the pinned version (docs/session-protocols.md)", r.cli.name)
		}
		f(t, r)
	})
}

// forEachSession runs f for every CLI of cs whose backend declares
// sessions (see forEachSessionRig), with a session opened on a fresh rig
// whose workdir holds an empty follow.log. The session is opened at
// permission perm ("" for the least under which each CLI's shell runs) and
// closed as openSession closes it.
func forEachSession(t *testing.T, cs []cli, perm invoker.Permission, f func(t *testing.T, r *rig, s invoker.Session)) {
	forEachSessionRig(t, cs, func(t *testing.T, r *rig) {
		req := invoker.Request{Workdir: r.workdir, Model: r.cli.model, Permission: r.cli.shell}
		if perm != "" {
			req.Permission = perm
		}
		writeFile(t, filepath.Join(r.workdir, "follow.log"), "")
		f(t, r, r.openSession(t, r.inv, req.Session()))
	})
}

// openSession opens a session of req on inv (the rig's Invoker, or one
// made from its options), failing the test if it does not open; a request
// without a workdir gets the rig's. The session is closed when the test
// ends, as tryOpenSession closes it.
func (r *rig) openSession(t *testing.T, inv invoker.Invoker, req invoker.SessionRequest) invoker.Session {
	t.Helper()
	s, err := r.tryOpenSession(t, inv, req)
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	return s
}

// tryOpenSession is openSession for a test that expects OpenSession may
// fail: it returns OpenSession's error. Its context bounds the session's
// whole life, not only its opening. A session that opens is closed when
// the test ends, with closeAndCheck.
func (r *rig) tryOpenSession(t *testing.T, inv invoker.Invoker, req invoker.SessionRequest) (invoker.Session, error) {
	t.Helper()
	if req.Workdir == "" {
		req.Workdir = r.workdir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	s, err := inv.OpenSession(ctx, req)
	if err != nil {
		return nil, err
	}
	t.Logf("session open in %v", time.Since(start))
	t.Cleanup(func() { r.closeAndCheck(t, s) })
	return s, nil
}

// closeAndCheck closes s and checks that Close succeeds and that no process
// of the rig outlives it. Close may be called more than once, so a test
// that closes a session early with it still has it checked at the end.
func (r *rig) closeAndCheck(t *testing.T, s invoker.Session) {
	t.Helper()
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	t.Logf("Close took %v", time.Since(start))
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes of the session alive after Close returned:\n%s", strings.Join(ps, "\n"))
	}
}

// turnCtx bounds one turn that no scenario should make wait.
func turnCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSessionTwoTurns(t *testing.T) {
	forEachSessionCLI(t, sessionTwoTurns)
}

// sessionTwoTurns runs two turns in s: each answers in the session, and the
// second model request carries the first turn.
func sessionTwoTurns(t *testing.T, r *rig, s invoker.Session) {
	r.srv.Enqueue(fakemodel.Answer("one done"), fakemodel.Answer("two done"))
	for i, want := range []string{"one done", "two done"} {
		prompt := []string{"first prompt", "second prompt"}[i]
		start := time.Now()
		var first time.Duration
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: prompt, OnEvent: func(invoker.Event) {
			if first == 0 {
				first = time.Since(start)
			}
		}})
		if err != nil {
			t.Fatalf("turn %d: Turn() error = %v; stderr tail:\n%s", i+1, err, res.Stderr)
		}
		t.Logf("turn %d: first event after %v, result after %v", i+1, first, res.Duration)
		if res.Text != want || res.SessionID == "" || res.SessionID != s.ID() || res.ExitCode != 0 {
			t.Errorf("turn %d: Result = %s, want text %q, the session's id and exit code 0", i+1, jsonString(res), want)
		}
	}
	reqs := r.srv.Scripted()
	if len(reqs) != 2 || !reqs[1].Contains("first prompt") || !reqs[1].Contains("one done") || !reqs[1].Contains("second prompt") {
		t.Errorf("the second turn's model request does not carry the first turn (%d model requests)", len(reqs))
	}
}

// interruptWhen runs a turn of prompt, cancels it once ready reports true,
// and checks that the turn ends in the CLI's protocol: the context's error,
// the session still open.
func interruptWhen(t *testing.T, s invoker.Session, prompt, what string, ready func() bool) {
	ctx, cancel := context.WithCancel(turnCtx(t))
	defer cancel()
	fired := cancelWhenReady(ctx, cancel, quick, ready)
	res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: prompt})
	var at time.Time
	select {
	case at = <-fired:
	default:
		t.Fatalf("Turn() returned before %s (no cancel): %v; stderr tail:\n%s", what, err, res.Stderr)
	}
	t.Logf("interrupted while %s: the turn ended %v after the cancel", what, time.Since(at))
	if !errors.Is(err, context.Canceled) || errors.Is(err, invoker.ErrSessionClosed) {
		t.Fatalf("interrupted Turn() error = %v, want context.Canceled with the session kept; stderr tail:\n%s", err, res.Stderr)
	}
	select {
	case <-s.Done():
		t.Fatalf("the session ended after an interrupt: %v", s.Err())
	default:
	}
}

func TestSessionInterruptWhileModelStreams(t *testing.T) {
	forEachSessionCLI(t, interruptWhileModelStreams)
}

// interruptWhileModelStreams cancels a turn of s while the model streams:
// the turn ends with the context's error (see interruptWhen), and the next
// turn answers with the conversation before the interrupt.
func interruptWhileModelStreams(t *testing.T, r *rig, s invoker.Session) {
	r.srv.Enqueue(fakemodel.Answer("one done"), fakemodel.Stall("partial words "), fakemodel.Answer("after interrupt"))
	if res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "first prompt"}); err != nil {
		t.Fatalf("first Turn() error = %v; stderr tail:\n%s", err, res.Stderr)
	}
	var seen time.Time
	interruptWhen(t, s, "second prompt", "the model streams", func() bool {
		if seen.IsZero() && len(r.srv.Scripted()) > 1 {
			seen = time.Now()
		}
		return !seen.IsZero() && time.Since(seen) > 300*time.Millisecond
	})
	nextTurn(t, s, "third prompt", "after interrupt", "the interrupt")
	// The turn before the interrupt is part of the conversation; whether
	// the interrupted prompt is, is the CLI's choice (Claude Code and
	// Codex keep it, Gemini drops it).
	reqs := r.srv.Scripted()
	if len(reqs) != 3 || !reqs[2].Contains("first prompt") || !reqs[2].Contains("one done") || !reqs[2].Contains("third prompt") {
		t.Errorf("the turn after the interrupt does not carry the conversation (%d model requests)", len(reqs))
	} else {
		t.Logf("the interrupted prompt is kept in the conversation: %v", reqs[2].Contains("second prompt"))
	}
}

// nextTurn runs a turn of prompt in s that must answer want, after what
// (for the failure message) happened in the session.
func nextTurn(t *testing.T, s invoker.Session, prompt, want, after string) {
	t.Helper()
	res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: prompt})
	if err != nil || res.Text != want {
		t.Fatalf("Turn() after %s = %s, %v; want %q", after, jsonString(res), err, want)
	}
}

func TestSessionInterruptWhileToolRuns(t *testing.T) {
	forEachSessionCLI(t, func(t *testing.T, r *rig, s invoker.Session) {
		r.srv.Enqueue(fakemodel.Shell(longTool), fakemodel.Answer("after tool"))
		interruptWhen(t, s, "follow", "a tool runs "+longTool, func() bool { return r.toolRunning(longTool) })
		// The CLI ends the tool itself as part of the interrupt; give it
		// the time the turn had to end.
		r.waitFor("the tool to end after the interrupt", quick, func() bool { return !r.toolRunning(longTool) })
		nextTurn(t, s, "and now", "after tool", "the interrupt")
	})
}

func TestSessionCloseWithTurnInFlight(t *testing.T) {
	forEachSessionCLI(t, func(t *testing.T, r *rig, s invoker.Session) {
		r.srv.Enqueue(fakemodel.Stall("partial words "))
		errc := make(chan error, 1)
		go func() {
			_, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "stall"})
			errc <- err
		}()
		r.waitFor("the model request", quick, func() bool { return len(r.srv.Scripted()) > 0 })
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
		t.Logf("Close with a turn in flight took %v", time.Since(start))
		if ps := r.survivors(); len(ps) > 0 {
			t.Errorf("processes of the session alive after Close returned:\n%s", strings.Join(ps, "\n"))
		}
		if err := <-errc; !errors.Is(err, invoker.ErrSessionClosed) {
			t.Errorf("Turn() in flight at Close error = %v, want ErrSessionClosed", err)
		}
	})
}

// A session resumes a conversation that Invoke started: the session's
// first model request carries the earlier turn (claude --resume, codex
// thread/resume). Gemini's sessions refuse Request.SessionID before
// anything starts (gemini's TestSessionResumeUnsupported): its session/load
// is not reliable (TestGeminiSessionLoadProbe), so Gemini is skipped here.
func TestSessionResumesInvoke(t *testing.T) {
	forEachSessionRig(t, clis, func(t *testing.T, r *rig) {
		first := invokeToResume(t, r)
		s, err := r.tryOpenSession(t, r.inv, invoker.SessionRequest{Model: r.cli.model, SessionID: first.SessionID})
		if errors.Is(err, invoker.ErrUnsupported) {
			// Gemini 0.61.0: session/load is not reliable, the
			// backend refuses SessionID in sessions.
			t.Skipf("%s does not resume in a session: %v", r.cli.name, err)
		}
		if err != nil {
			t.Fatalf("OpenSession(SessionID: %s) error = %v", first.SessionID, err)
		}
		resumedTurn(t, r, s, first.SessionID)
	})
}

// invokeToResume runs a first prompt with Invoke for a session to resume,
// the model scripted for it and for the turn of resumedTurn, and returns
// its Result, which has a session id.
func invokeToResume(t *testing.T, r *rig) *invoker.Result {
	t.Helper()
	r.srv.Enqueue(fakemodel.Answer("first answer"), fakemodel.Answer("second answer"))
	first, err := r.invoke(context.Background(), r.request("first prompt"))
	if err != nil || first.SessionID == "" {
		t.Fatalf("Invoke() = %s, %v; want a session id", jsonString(first), err)
	}
	return first
}

// resumedTurn runs a turn in s, a session that resumed the conversation of
// invokeToResume with its id: the turn answers in that session, and its
// model request carries the first turn.
func resumedTurn(t *testing.T, r *rig, s invoker.Session, id string) {
	t.Helper()
	res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "second prompt"})
	if err != nil || res.Text != "second answer" || res.SessionID != id {
		t.Fatalf("Turn() = %s, %v; want %q in session %s", jsonString(res), err, "second answer", id)
	}
	r.checkCarriesFirstTurn(t, "the resumed session's model request")
}

// checkCarriesFirstTurn checks that the model got two requests and that
// the second, what, carries the first prompt and the first answer.
func (r *rig) checkCarriesFirstTurn(t *testing.T, what string) {
	t.Helper()
	reqs := r.srv.Scripted()
	if len(reqs) != 2 || !reqs[1].Contains("first prompt") || !reqs[1].Contains("first answer") {
		t.Errorf("%s does not carry the first turn (%d model requests)", what, len(reqs))
	}
}

// Invoke resumes a conversation held in a session, after Close: the id a
// session reports is a session id like any other.
func TestInvokeResumesSession(t *testing.T) {
	forEachSessionCLI(t, func(t *testing.T, r *rig, s invoker.Session) {
		r.srv.Enqueue(fakemodel.Answer("first answer"), fakemodel.Answer("second answer"))
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "first prompt"})
		if err != nil || res.SessionID == "" || s.ID() != res.SessionID {
			t.Fatalf("Turn() = %s, %v (ID() %q); want a session id", jsonString(res), err, s.ID())
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		req := r.request("second prompt")
		req.Permission = r.cli.shell // as the session was opened
		req.SessionID = res.SessionID
		second, err := r.invoke(context.Background(), req)
		if err != nil || second.Text != "second answer" || second.SessionID != res.SessionID {
			t.Fatalf("resumed Invoke() = %s, %v; want %q in session %s", jsonString(second), err, "second answer", res.SessionID)
		}
		r.checkCarriesFirstTurn(t, "the resumed run's model request")
	})
}

// A turn whose tool starts a daemon (setsid tail -f FILE: a new session,
// which the CLI's own interrupt does not reach) and is then cancelled
// leaves nothing: the daemon is gone when Turn returns, and the session
// answers the next turn. The sessions run unlimited: Claude Code 2.1.197
// refuses setsid in its default mode ("runs its argument as a command —
// cannot be statically analyzed").
func TestSessionCancelSweepsDaemon(t *testing.T) {
	forEachSession(t, clis, invoker.Unlimited, func(t *testing.T, r *rig, s invoker.Session) {
		r.srv.Enqueue(fakemodel.Shell("setsid "+longTool), fakemodel.Answer("after the sweep"))
		interruptWhen(t, s, "follow", "the daemon runs "+longTool, func() bool { return r.toolRunning(longTool) })
		if r.toolRunning(longTool) {
			t.Errorf("%q alive when the cancelled Turn returned, want it swept", longTool)
		}
		nextTurn(t, s, "and now", "after the sweep", "the swept turn")
	})
}
