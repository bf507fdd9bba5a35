package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSessions runs the session cases on the claude backend, with the fake
// agent speaking Claude Code's stream-json input and control requests.
func TestSessions(t *testing.T) {
	agenttest.RunSessions(t, fakeagent.Claude, claude.New)
}

// openSession opens a session of the fake Claude Code running s, closed
// at the end of the test.
func openSession(t *testing.T, s *fakeagent.Script, req invoker.SessionRequest) invoker.Session {
	t.Helper()
	s.Flavor, s.Tag = fakeagent.Claude, fakeagent.NewTag()
	if s.RecordDir == "" {
		s.RecordDir = t.TempDir()
	}
	inv := claude.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	req.Workdir, req.Env = t.TempDir(), append(req.Env, s.Env()...)
	sess, err := inv.OpenSession(context.Background(), req)
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
			t.Errorf("processes of the session alive after Close: %v", left)
		}
	})
	return sess
}

// A steer given once the turn's done event has come is refused as one
// with no turn in progress (ErrInvalidRequest), and never written: before,
// it was accepted, Claude Code answered it with a turn of its own, and
// that turn's answer came into the session's next turn.
func TestSteerAfterDone(t *testing.T) {
	s := fakeagent.Script{Answers: []string{"first answer", "second answer"}}
	sess := openSession(t, &s, invoker.SessionRequest{})
	const late = "a steer after the done event"
	var steerErr error
	steered := false
	res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "one", OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindDone {
			steered = true
			steerErr = sess.Steer(context.Background(), late)
		}
	}})
	if err != nil || res.Text != "first answer" {
		t.Fatalf("Turn(one) = %q, %v; want the first answer", res.Text, err)
	}
	if !steered {
		t.Fatal("no done event")
	}
	if !errors.Is(steerErr, invoker.ErrInvalidRequest) || !strings.Contains(fmtErr(steerErr), "no turn is in progress") {
		t.Errorf("Steer() after the done event = %v, want ErrInvalidRequest saying no turn is in progress", steerErr)
	}
	res, err = sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "two"})
	if err != nil || res.Text != "second answer" {
		t.Errorf("Turn(two) = %q, %v; want the second answer", res.Text, err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := rec.Stdin(); err != nil || strings.Contains(string(in), late) {
		t.Errorf("the CLI was sent the refused steer (stdin read: %v):\n%s", err, in)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A model switch Claude Code refuses is not taken for made: the turn
// says so with a warning naming the model, and the next turn that asks
// for that model asks again (as Gemini's records a switch only once
// accepted). A switch it takes is sent once.
func TestModelSwitchRefused(t *testing.T) {
	s := fakeagent.Script{Answer: "answered"}
	sess := openSession(t, &s, invoker.SessionRequest{})
	const taken = "claude-haiku-4-5"
	for i, model := range []string{fakeagent.RefusedModel, fakeagent.RefusedModel, taken, taken} {
		var warnings []string
		res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "hi", Model: model, OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning {
				warnings = append(warnings, ev.Text)
			}
		}})
		if err != nil || res.Text != "answered" {
			t.Fatalf("turn %d: Turn(Model %q) = %q, %v; want the answer", i+1, model, res.Text, err)
		}
		refusedWarning := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, model) && strings.Contains(w, "not available") })
		if want := i < 2; refusedWarning != want {
			t.Errorf("turn %d (model %s): warnings %q; want a warning naming the refused switch: %v", i+1, model, warnings, want)
		}
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	in, err := rec.Stdin()
	if err != nil {
		t.Fatal(err)
	}
	var switches []string
	for _, l := range strings.Split(string(in), "\n") {
		var c struct {
			Request struct{ Subtype, Model string }
		}
		if json.Unmarshal([]byte(l), &c) == nil && c.Request.Subtype == "set_model" {
			switches = append(switches, c.Request.Model)
		}
	}
	if want := []string{fakeagent.RefusedModel, fakeagent.RefusedModel, taken}; !slices.Equal(switches, want) {
		t.Errorf("set_model requests sent: %q, want %q (a refused switch asked again, a taken one once)", switches, want)
	}
}

// A turn that lowers the session's permission never runs above it: when
// Claude Code refuses the switch, the turn fails naming the refusal and
// its prompt is never written; the session goes on, and a later turn at
// the session's level runs.
func TestLoweringRefusedTurnDoesNotRun(t *testing.T) {
	s := fakeagent.Script{Answer: "answered", RefuseModeSwitch: true}
	sess := openSession(t, &s, invoker.SessionRequest{Permission: invoker.Unlimited})
	res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "lowered", Permission: invoker.ReadOnly})
	var se *invoker.StreamError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "permission mode not allowed") || res.Text != "" {
		t.Errorf("Turn(Permission ReadOnly) = %q, %v; want no answer and a *StreamError naming Claude Code's refusal", res.Text, err)
	}
	if res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "at the session's level"}); err != nil || res.Text != "answered" {
		t.Errorf("next Turn() = %q, %v; want the answer", res.Text, err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	in, err := rec.Stdin()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(in), `"lowered"`) {
		t.Errorf("the prompt of the turn whose switch was refused was written:\n%s", in)
	}
}
