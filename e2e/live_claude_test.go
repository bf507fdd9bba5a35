//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Claude Code's live turns, measured with 2.1.197: every scenario is
// played (see the claude package doc for what the CLI does).
func init() {
	live["claude"] = &liveCLI{
		delta:            claudeDelta,
		steer:            claudeSteer,
		switchModel:      claudeSwitchModel,
		switchPermission: claudeSwitchPermission,
		fork:             claudeFork,
		rateLimit:        claudeRateLimit,
	}
}

// claudeTurn runs one turn that must succeed with want.
func claudeTurn(t *testing.T, s invoker.Session, tr invoker.TurnRequest, want string) *invoker.Result {
	t.Helper()
	res, err := s.Turn(turnCtx(t), tr)
	if err != nil {
		t.Fatalf("Turn(%q) error = %v; stderr tail:\n%s", tr.Prompt, err, res.Stderr)
	}
	if strings.TrimSpace(res.Text) != strings.TrimSpace(want) {
		t.Fatalf("Turn(%q) text = %q, want %q", tr.Prompt, res.Text, want)
	}
	return res
}

func claudeDelta(t *testing.T, r *rig) {
	t.Run("invoke", func(t *testing.T) {
		r := newRig(t, r.cli)
		r.srv.Enqueue(pacedAnswer())
		rec, got := recordEvents()
		req := r.request("tell me a long story")
		req.Deltas, req.OnEvent = true, rec
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		if strings.TrimSpace(res.Text) != strings.TrimSpace(longAnswer) {
			t.Errorf("Result.Text = %q, want the answer", res.Text)
		}
		checkDeltas(t, got(), longAnswer)
	})
	t.Run("session", func(t *testing.T) {
		r := newRig(t, r.cli)
		s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell, Deltas: true})
		r.srv.Enqueue(fakemodel.Answer("short one"), pacedAnswer())
		// A session that asked for deltas gets them in every turn; one
		// turn first, so the second is not the session's first.
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "warm up"}, "short one")
		rec, got := recordEvents()
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "tell me a long story", OnEvent: rec}, longAnswer)
		checkDeltas(t, got(), longAnswer)
	})
	t.Run("no deltas unless asked", func(t *testing.T) {
		r := newRig(t, r.cli)
		r.srv.Enqueue(pacedAnswer())
		rec, got := recordEvents()
		req := r.request("tell me a long story")
		req.OnEvent = rec
		if _, err := r.invoke(context.Background(), req); err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		for _, e := range got() {
			if e.ev.Kind == invoker.KindDelta {
				t.Fatalf("a delta came to a run that did not ask for them: %q", e.ev.Text)
			}
		}
	})
}

// steerDuring runs a turn of prompt in s, steers it with steer once
// started reports an event that shows the CLI at the right point, and
// returns the turn's result and events.
func steerDuring(t *testing.T, s invoker.Session, prompt, steer string, started func(invoker.Event) bool) (*invoker.Result, []invoker.Event) {
	t.Helper()
	at := make(chan struct{})
	var evs []invoker.Event
	once := false
	type turnResult struct {
		res *invoker.Result
		err error
	}
	done := make(chan turnResult, 1)
	go func() {
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: prompt, OnEvent: func(ev invoker.Event) {
			evs = append(evs, ev)
			if !once && started(ev) {
				once = true
				close(at)
			}
		}})
		done <- turnResult{res, err}
	}()
	select {
	case <-at:
	case tr := <-done:
		t.Fatalf("the turn ended before the point to steer it: %v", tr.err)
	}
	if err := s.Steer(turnCtx(t), steer); err != nil {
		t.Fatalf("Steer() error = %v", err)
	}
	tr := <-done
	if tr.err != nil {
		t.Fatalf("steered Turn() error = %v; stderr tail:\n%s", tr.err, tr.res.Stderr)
	}
	return tr.res, evs
}

func claudeSteer(t *testing.T, r *rig) {
	const steer = "ALSO-MENTION-PEARS"
	// While the model writes its answer, Claude Code finishes it and then
	// answers the steer in a turn of its own: the Turn ends at that
	// second result.
	t.Run("while the model writes", func(t *testing.T) {
		r := newRig(t, r.cli)
		s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell, Deltas: true})
		r.srv.Enqueue(pacedAnswer(), fakemodel.Answer("pears too"), fakemodel.Answer("next turn"))
		res, evs := steerDuring(t, s, "tell me a long story", steer, func(ev invoker.Event) bool { return ev.Kind == invoker.KindDelta })
		if res.Text != "pears too" {
			t.Errorf("steered turn text = %q, want the answer to the steer", res.Text)
		}
		reqs := r.srv.Scripted()
		if len(reqs) != 2 || reqs[0].Contains(steer) || !reqs[1].Contains(steer) || !reqs[1].Contains("streaming words") {
			t.Fatalf("want the steer in the second model request, after the first answer (%d requests)", len(reqs))
		}
		done := 0
		for _, e := range evs {
			if e.Kind == invoker.KindDone {
				done++
			}
		}
		if done != 1 {
			t.Errorf("the steered turn had %d done events, want 1", done)
		}
		// No result of the steer is left to end the next turn early.
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "and the next"}, "next turn")
	})
	// While a tool runs, Claude Code gives the steer to the model with
	// the tool's result, in the same turn.
	t.Run("while a tool runs", func(t *testing.T) {
		r := newRig(t, r.cli)
		s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell})
		r.srv.Enqueue(fakemodel.Shell("sleep 2"), fakemodel.Answer("after tool"), fakemodel.Answer("next turn"))
		res, _ := steerDuring(t, s, "run it", steer, func(ev invoker.Event) bool { return ev.Kind == invoker.KindToolCall })
		if res.Text != "after tool" {
			t.Errorf("steered turn text = %q, want %q", res.Text, "after tool")
		}
		reqs := r.srv.Scripted()
		if len(reqs) != 2 || !reqs[1].Contains(steer) || !reqs[1].Contains("tool_result") {
			t.Fatalf("want the steer in the request that carries the tool result (%d requests)", len(reqs))
		}
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "and the next"}, "next turn")
	})
	// A steer of a turn that is then cancelled goes with it: the next
	// turn gets its own answer.
	t.Run("then cancelled", func(t *testing.T) {
		r := newRig(t, r.cli)
		s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell, Deltas: true})
		r.srv.Enqueue(fakemodel.Stall("partial words "), fakemodel.Answer("next turn"), fakemodel.Answer("spare"))
		ctx, cancel := context.WithCancel(turnCtx(t))
		defer cancel()
		delta := make(chan struct{})
		var once bool
		type turnResult struct {
			res *invoker.Result
			err error
		}
		done := make(chan turnResult, 1)
		go func() {
			res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "stall", OnEvent: func(ev invoker.Event) {
				if ev.Kind == invoker.KindDelta && !once {
					once = true
					close(delta)
				}
			}})
			done <- turnResult{res, err}
		}()
		select {
		case <-delta:
		case tr := <-done:
			t.Fatalf("the turn ended before the model wrote: %v; stderr tail:\n%s", tr.err, tr.res.Stderr)
		}
		if err := s.Steer(turnCtx(t), steer); err != nil {
			t.Fatalf("Steer() error = %v", err)
		}
		cancel()
		tr := <-done
		if !errors.Is(tr.err, context.Canceled) || errors.Is(tr.err, invoker.ErrSessionClosed) {
			t.Fatalf("cancelled Turn() = %v, want context.Canceled with the session kept; stderr tail:\n%s", tr.err, tr.res.Stderr)
		}
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "and the next"})
		if err != nil {
			t.Fatalf("next Turn() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		// The CLI's turn that takes the steer is interrupted as it starts
		// (its system init). On a loaded machine its model request may be
		// on its way by then: it is cut off, and its answer (the script's
		// next) is never delivered. Either way the next turn's text is the
		// answer to its own request.
		reqs := r.srv.Scripted()
		answers := []string{"partial words ", "next turn", "spare"}
		last := len(reqs) - 1
		if last < 1 || last > 2 || !reqs[last].Contains("and the next") {
			t.Fatalf("%d model requests, want the stall, at most one for the steer, then the next turn's", len(reqs))
		}
		if last == 2 && (!reqs[1].Contains(steer) || reqs[1].Contains("and the next")) {
			t.Errorf("the request between the cancelled turn and the next is not the steer's")
		}
		if strings.TrimSpace(res.Text) != answers[last] {
			t.Errorf("next Turn() text = %q, want %q, the answer to its own request (a result of the cancelled steer ended it?)", res.Text, answers[last])
		}
	})
}

func claudeSwitchModel(t *testing.T, r *rig) {
	s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell, Model: "claude-sonnet-4-5"})
	r.srv.Enqueue(fakemodel.Answer("one"), fakemodel.Answer("two"), fakemodel.Answer("three"))
	claudeTurn(t, s, invoker.TurnRequest{Prompt: "first"}, "one")
	claudeTurn(t, s, invoker.TurnRequest{Prompt: "second", Model: "claude-haiku-4-5"}, "two")
	claudeTurn(t, s, invoker.TurnRequest{Prompt: "third"}, "three")
	reqs := r.srv.Scripted()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, want := range []string{"claude-sonnet-4-5", "claude-haiku-4-5", "claude-haiku-4-5"} {
		if got := modelOf(t, reqs[i]); got != want {
			t.Errorf("turn %d asked model %q, want %q (a switch holds from its turn on)", i+1, got, want)
		}
	}
}

func claudeSwitchPermission(t *testing.T, r *rig) {
	s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: invoker.WorkspaceWrite})
	steps := []struct {
		perm  invoker.Permission
		file  string
		write bool
	}{
		{invoker.ReadOnly, "lowered.txt", false},
		{invoker.WorkspaceWrite, "raised.txt", true},
		{invoker.ReadOnly, "lowered-again.txt", false},
	}
	for i, st := range steps {
		path := filepath.Join(r.workdir, st.file)
		r.srv.Enqueue(fakemodel.CallTool("Write", map[string]any{"file_path": path, "content": "written\n"}),
			fakemodel.Answer("turn "+strconv.Itoa(i+1)))
		var result *invoker.Tool
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "write " + st.file, Permission: st.perm, OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindToolResult {
				result = ev.Tool
			}
		}}, "turn "+strconv.Itoa(i+1))
		_, err := os.Stat(path)
		if wrote := err == nil; wrote != st.write {
			t.Errorf("turn %d at %s: file written %v, want %v (tool result %+v)", i+1, st.perm, wrote, st.write, result)
		}
		if result == nil || (result.Status == "success") != st.write {
			t.Errorf("turn %d at %s: Write tool result %+v, want success %v", i+1, st.perm, result, st.write)
		}
	}
	// Above the ceiling is refused before anything is sent.
	if _, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "x", Permission: invoker.Unlimited}); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("a turn above the session's permission: error %v, want ErrInvalidRequest", err)
	}
}

func claudeFork(t *testing.T, r *rig) {
	ctx := context.Background()
	r.srv.Enqueue(fakemodel.Answer("original answer"))
	res, err := r.invoke(ctx, r.request("remember APPLE"))
	if err != nil {
		t.Fatalf("first Invoke() error = %v", err)
	}
	orig := res.SessionID

	// Forked by Invoke.
	r.srv.Enqueue(fakemodel.Answer("forked by invoke"))
	req := r.request("INVOKE-FORK prompt")
	req.SessionID, req.Fork = orig, true
	res, err = r.invoke(ctx, req)
	if err != nil {
		t.Fatalf("forking Invoke() error = %v", err)
	}
	if res.SessionID == "" || res.SessionID == orig {
		t.Errorf("the fork reported session %q, want a new one (original %q)", res.SessionID, orig)
	}
	if q := r.srv.Scripted()[1]; !q.Contains("remember APPLE") || !q.Contains("original answer") {
		t.Errorf("the fork's first request does not carry the original history")
	}

	// Forked by a session.
	s := r.openSession(t, r.inv, invoker.SessionRequest{Permission: r.cli.shell, SessionID: orig, Fork: true})
	r.srv.Enqueue(fakemodel.Answer("forked by session"))
	sres := claudeTurn(t, s, invoker.TurnRequest{Prompt: "SESSION-FORK prompt"}, "forked by session")
	if sres.SessionID == "" || sres.SessionID == orig || sres.SessionID == res.SessionID {
		t.Errorf("the session fork reported session %q, want a new one (original %q, other fork %q)", sres.SessionID, orig, res.SessionID)
	}
	if q := r.srv.Scripted()[2]; !q.Contains("remember APPLE") || !q.Contains("original answer") || q.Contains("INVOKE-FORK") {
		t.Errorf("the session fork's first request does not carry exactly the original history")
	}

	r.closeAndCheck(t, s)

	// The original goes on unchanged.
	r.srv.Enqueue(fakemodel.Answer("back"))
	req = r.request("back to the original")
	req.SessionID = orig
	res, err = r.invoke(ctx, req)
	if err != nil || res.SessionID != orig {
		t.Fatalf("resuming the original = %s, %v; want session %s", jsonString(res), err, orig)
	}
	q := r.srv.Scripted()[3]
	if !q.Contains("remember APPLE") || !q.Contains("back to the original") {
		t.Errorf("the resumed original lacks its own history")
	}
	if q.Contains("INVOKE-FORK") || q.Contains("SESSION-FORK") || q.Contains("forked by") {
		t.Errorf("the resumed original carries a fork's history")
	}
}

func claudeRateLimit(t *testing.T, r *rig) {
	checkLimit := func(t *testing.T, err error) *invoker.LimitError {
		t.Helper()
		var le *invoker.LimitError
		if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) {
			t.Fatalf("error = %v (%T), want a *LimitError matching ErrRateLimited", err, err)
		}
		return le
	}
	// With an API key Claude Code retries a 429 (here once) and then
	// fails.
	t.Run("retried", func(t *testing.T) {
		r := newRig(t, r.cli)
		r.srv.Enqueue(
			fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "slow down",
				Header: http.Header{"X-Should-Retry": {"true"}, "Retry-After": {"1"}}},
			fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "slow down"})
		var retry *invoker.Retry
		req := r.request("hi")
		req.Env = []string{"CLAUDE_CODE_MAX_RETRIES=1"}
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning && ev.Retry != nil {
				retry = ev.Retry
			}
		}
		_, err := r.invoke(context.Background(), req)
		checkLimit(t, err)
		if retry == nil || retry.HTTPStatus != 429 || retry.Attempt != 1 || retry.MaxAttempts != 1 || retry.Delay != time.Second {
			t.Errorf("retry warning %+v, want attempt 1 of 1 after the server's retry-after 1s, status 429", retry)
		}
		if n := len(r.srv.Scripted()); n != 2 {
			t.Errorf("%d model requests, want 2 (one retry)", n)
		}
	})
	// With a claude.ai login Claude Code reads the unified rate-limit
	// headers and says when the limit resets.
	t.Run("rejected", func(t *testing.T) {
		r := newRig(t, r.cli)
		resets := time.Now().Add(time.Hour).Truncate(time.Second)
		r.srv.Enqueue(fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "rate limited", Header: http.Header{
			"Anthropic-Ratelimit-Unified-Status":               {"rejected"},
			"Anthropic-Ratelimit-Unified-Reset":                {strconv.FormatInt(resets.Unix(), 10)},
			"Anthropic-Ratelimit-Unified-Representative-Claim": {"five_hour"},
		}})
		var rl *invoker.RateLimit
		req := r.request("hi")
		req.Env = []string{"ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-fakemodel", "CLAUDE_CODE_MAX_RETRIES=1"}
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindRateLimit {
				rl = ev.RateLimit
			}
		}
		_, err := r.invoke(context.Background(), req)
		le := checkLimit(t, err)
		if rl == nil || rl.Status != "rejected" || rl.Limit != "five_hour" || !rl.ResetsAt.Equal(resets) {
			t.Errorf("rate-limit event %+v, want five_hour rejected until %v", rl, resets)
		}
		if !le.ResetsAt.Equal(resets) {
			t.Errorf("LimitError.ResetsAt = %v, want %v", le.ResetsAt, resets)
		}
	})
}
