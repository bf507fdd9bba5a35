//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Gemini CLI 0.61.0's live turns: both modes stream the answer (stream-json
// message chunks, ACP agent_message_chunk), ACP switches a session's model
// (session/set_model) and mode (session/set_mode), neither steers nor
// forks, and a 429 whose error carries a google.rpc.RetryInfo says when to
// retry.
func init() {
	live["gemini"] = &liveCLI{
		delta:            geminiDelta,
		steer:            geminiSteer,
		switchModel:      geminiSwitchModel,
		switchPermission: geminiSwitchPermission,
		fork:             geminiFork,
		rateLimit:        geminiRateLimit,
	}
}

// geminiSession opens a session of the rig at perm, closed when the test
// ends, with the check that nothing of it survives.
func geminiSession(t *testing.T, r *rig, perm invoker.Permission, deltas bool) invoker.Session {
	t.Helper()
	req := r.sessionRequest(perm)
	req.Deltas = deltas
	return r.openSession(t, r.inv, req)
}

// geminiAnswer is a long answer that does not repeat itself: Gemini's loop
// detection stops one that does (longAnswer repeats a sentence 25 times)
// with "Potential loop detected" and asks the model again.
var geminiAnswer = func() string {
	var b strings.Builder
	for i := range 80 {
		fmt.Fprintf(&b, "word%02d ", i)
	}
	return b.String()
}()

func geminiDelta(t *testing.T, r *rig) {
	paced := fakemodel.Turn{Text: geminiAnswer, Pace: deltaPace}
	t.Run("invoke", func(t *testing.T) {
		r.srv.Enqueue(paced)
		on, got := recordEvents()
		req := r.request("write a long answer")
		req.Deltas, req.OnEvent = true, on
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		checkDeltas(t, got(), geminiAnswer)
		if strings.TrimSpace(res.Text) != strings.TrimSpace(geminiAnswer) {
			t.Errorf("Result.Text = %q, want the answer", res.Text)
		}
	})
	t.Run("session", func(t *testing.T) {
		s := geminiSession(t, r, r.cli.shell, true)
		r.srv.Enqueue(paced)
		on, got := recordEvents()
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "write a long answer", OnEvent: on})
		if err != nil {
			t.Fatalf("Turn() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		checkDeltas(t, got(), geminiAnswer)
	})
	t.Run("not asked", func(t *testing.T) {
		// Without Request.Deltas no delta is delivered; the whole
		// message is.
		r.srv.Enqueue(fakemodel.Answer("just the whole answer"))
		var kinds []invoker.EventKind
		var whole []string
		req := r.request("answer")
		req.OnEvent = func(ev invoker.Event) {
			kinds = append(kinds, ev.Kind)
			if ev.Kind == invoker.KindMessage {
				whole = append(whole, ev.Text)
			}
		}
		if _, err := r.invoke(context.Background(), req); err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		for _, k := range kinds {
			if k == invoker.KindDelta {
				t.Errorf("a delta was delivered to a run that did not ask for them: %v", kinds)
				break
			}
		}
		if len(whole) != 1 || whole[0] != "just the whole answer" {
			t.Errorf("whole messages = %q, want the answer once", whole)
		}
	})
}

func geminiSteer(t *testing.T, r *rig) {
	s := geminiSession(t, r, r.cli.shell, false)
	r.srv.Enqueue(fakemodel.Stall("partial words "))
	ctx, cancel := context.WithCancel(turnCtx(t))
	defer cancel()
	turn := make(chan error, 1)
	go func() {
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "stall"})
		turn <- err
	}()
	r.waitFor("the turn's model request", quick, func() bool { return len(r.srv.Scripted()) == 1 })
	err := s.Steer(context.Background(), "and also this")
	if !errors.Is(err, invoker.ErrUnsupported) {
		t.Errorf("Steer() during a turn = %v, want ErrUnsupported", err)
	}
	cancel()
	if err := <-turn; !errors.Is(err, context.Canceled) {
		t.Errorf("the turn after the refused steer = %v, want context.Canceled", err)
	}
	// The steer sent nothing: the model was asked once, with no trace of
	// the message.
	for _, q := range r.srv.Requests() {
		if q.Contains("and also this") {
			t.Errorf("the refused steer reached the model: %s %s", q.Method, q.Path)
		}
	}
	if n := len(r.srv.Scripted()); n != 1 {
		t.Errorf("%d model requests, want the turn's one", n)
	}
}

func geminiFork(t *testing.T, r *rig) {
	req := r.request("fork it")
	req.SessionID, req.Fork = "5e59c07d-7065-4197-ac62-4056d87dfa14", true
	res, err := r.invoke(context.Background(), req)
	if !errors.Is(err, invoker.ErrUnsupported) {
		t.Errorf("Invoke(Fork) error = %v, want ErrUnsupported", err)
	}
	if res.Containment != "" || res.ExitCode != -1 {
		t.Errorf("Invoke(Fork) Result = %s, want one of a run that never started", jsonString(res))
	}
	sreq := req.Session()
	sreq.Permission = r.cli.shell
	if s, err := r.inv.OpenSession(context.Background(), sreq); !errors.Is(err, invoker.ErrUnsupported) {
		if s != nil {
			s.Close()
		}
		t.Errorf("OpenSession(Fork) error = %v, want ErrUnsupported", err)
	}
	if n := len(r.srv.Requests()); n > 0 {
		t.Errorf("%d model requests after the refused forks, want none", n)
	}
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes alive after the refused forks:\n%s", strings.Join(ps, "\n"))
	}
}

// geminiSwitchModel: the model is in the request's path
// (/v1beta/models/MODEL:streamGenerateContent).
func geminiSwitchModel(t *testing.T, r *rig) {
	s := geminiSession(t, r, r.cli.shell, false)
	r.srv.Enqueue(fakemodel.Answer("one"), fakemodel.Answer("two"), fakemodel.Answer("three"))
	for i, tc := range []struct{ model, want string }{
		{"", r.cli.model},
		{"gemini-2.5-flash", "gemini-2.5-flash"},
		{"", "gemini-2.5-flash"}, // the switch holds for the turns after
	} {
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "turn", Model: tc.model})
		if err != nil {
			t.Fatalf("turn %d (Model %q): Turn() error = %v; stderr tail:\n%s", i+1, tc.model, err, res.Stderr)
		}
		reqs := r.srv.Scripted()
		if len(reqs) != i+1 {
			t.Fatalf("turn %d: %d model requests, want %d", i+1, len(reqs), i+1)
		}
		if want := "/models/" + tc.want + ":streamGenerateContent"; !strings.HasSuffix(reqs[i].Path, want) {
			t.Errorf("turn %d (Model %q): the model was asked at %s, want %s", i+1, tc.model, reqs[i].Path, want)
		}
	}
}

// geminiSwitchPermission: a shell command runs under Unlimited (yolo),
// is refused after a switch to ReadOnly (ACP's default mode asks, and the
// session declines), and runs again after a switch back.
func geminiSwitchPermission(t *testing.T, r *rig) {
	// The ceiling holds: no turn goes above the level of the open.
	ro := geminiSession(t, r, invoker.ReadOnly, false)
	if _, err := ro.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "up", Permission: invoker.Unlimited}); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("a turn above the session's ceiling = %v, want ErrInvalidRequest", err)
	}
	if err := ro.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if n := len(r.srv.Requests()); n > 0 {
		t.Errorf("%d model requests for the refused turn, want none", n)
	}
	s := geminiSession(t, r, invoker.Unlimited, false)
	for i, tc := range []struct {
		perm invoker.Permission
		file string
		runs bool
	}{
		{"", "first.txt", true},
		{invoker.ReadOnly, "lowered.txt", false},
		{invoker.Unlimited, "raised.txt", true},
	} {
		r.srv.Enqueue(fakemodel.Shell("touch "+tc.file), fakemodel.Answer("turn done"))
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "make " + tc.file, Permission: tc.perm})
		if err != nil || res.Text != "turn done" {
			t.Fatalf("turn %d (Permission %q): Turn() = %s, %v; stderr tail:\n%s", i+1, tc.perm, jsonString(res), err, res.Stderr)
		}
		_, serr := os.Stat(filepath.Join(r.workdir, tc.file))
		if ran := serr == nil; ran != tc.runs {
			t.Errorf("turn %d (Permission %q): touch %s ran = %v, want %v", i+1, tc.perm, tc.file, ran, tc.runs)
		}
	}
}

// geminiRateLimit scripts two 429s whose error says to retry after 2s
// (google.rpc.RetryInfo) with general.maxAttempts 2: Gemini retries once,
// and the turn fails with a *LimitError carrying when the limit resets.
// Gemini reports the retry only on stderr: a run's comes as a retry
// warning; a session's stderr reaches the pipe only when Gemini exits
// (0.61.0's ACP mode: the session's stderr tail is empty while it runs),
// so a session turn has none.
func geminiRateLimit(t *testing.T, r *rig) {
	writeFile(t, filepath.Join(r.home, ".gemini", "settings.json"), `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"maxAttempts": 2},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
	limited := func() fakemodel.Turn {
		return fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "Resource has been exhausted (e.g. check quota).",
			Header: http.Header{"Retry-After": {"2"}}}
	}
	check := func(t *testing.T, start time.Time, base, wantRetries int, events []invoker.Event, err error) {
		t.Helper()
		var le *invoker.LimitError
		if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) {
			t.Fatalf("error = %v, want a *LimitError matching ErrRateLimited", err)
		}
		// Reported at the second failure, which came after the first and
		// Gemini's backoff: at least 2s after the start, at most 2s after now.
		if le.ResetsAt.Before(start.Add(2*time.Second)) || le.ResetsAt.After(time.Now().Add(2*time.Second)) {
			t.Errorf("ResetsAt = %v, want 2s after the failure (between %v and %v)", le.ResetsAt, start.Add(2*time.Second), time.Now().Add(2*time.Second))
		}
		var retries []*invoker.Retry
		for _, ev := range events {
			if ev.Kind == invoker.KindWarning && ev.Retry != nil {
				retries = append(retries, ev.Retry)
			}
		}
		if len(retries) != wantRetries {
			t.Errorf("retry warnings = %s, want %d; events:\n%s", jsonString(retries), wantRetries, jsonString(events))
		} else if wantRetries > 0 && (retries[0].Attempt != 1 || retries[0].Delay <= 0 || !retries[0].ResetsAt.After(start)) {
			t.Errorf("retry = %s, want attempt 1, with its delay and reset", jsonString(retries[0]))
		}
		if n := len(r.srv.Scripted()) - base; n != 2 {
			t.Errorf("%d model requests, want the two attempts", n)
		}
	}
	t.Run("invoke", func(t *testing.T) {
		r.srv.Enqueue(limited(), limited())
		var events []invoker.Event
		req := r.request("hi")
		req.OnEvent = func(ev invoker.Event) { events = append(events, ev) }
		start := time.Now()
		_, err := r.invoke(context.Background(), req)
		check(t, start, 0, 1, events, err)
	})
	t.Run("session", func(t *testing.T) {
		s := geminiSession(t, r, r.cli.shell, false)
		before := len(r.srv.Scripted())
		r.srv.Enqueue(limited(), limited())
		var events []invoker.Event
		start := time.Now()
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "hi", OnEvent: func(ev invoker.Event) { events = append(events, ev) }})
		check(t, start, before, 0, events, err)
		if res.Stderr != "" {
			t.Logf("the session's stderr while it runs: %s", res.Stderr)
		}
		// The session goes on after the limit.
		r.srv.Enqueue(fakemodel.Answer("later"))
		if res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "again"}); err != nil || res.Text != "later" {
			t.Errorf("Turn() after the rate limit = %s, %v; want %q", jsonString(res), err, "later")
		}
	})
}
