//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Codex's live turns run on its app-server (codex/codex.go, Live turns):
// Invoke routes a request with Deltas or Fork there, and sessions switch
// model and sandbox with turn/start's overrides and steer with turn/steer.
// With CLINVOKE_CAPTURE=1 each scenario also records what it exchanged
// with the real CLI into codex/testdata/live/<scenario>.jsonl (the format
// of TestCaptureSessions), which the codex package's unit tests replay.
func init() {
	live["codex"] = &liveCLI{
		delta:            codexDelta,
		steer:            codexSteer,
		switchModel:      codexSwitchModel,
		switchPermission: codexSwitchPermission,
		fork:             codexFork,
		rateLimit:        codexRateLimit,
	}
}

// codexInvoker returns the rig's Invoker or, when recording, one whose
// CLI runs behind the capture proxy; the transcript is written to
// codex/testdata/live/name.jsonl when the test ends.
func codexInvoker(t *testing.T, r *rig, name string) invoker.Invoker {
	if os.Getenv(captureEnv) != "1" {
		return r.inv
	}
	bin, err := exec.LookPath(r.cli.name)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "capture.jsonl")
	env := append(slices.Clone(r.opts.Env), captureEnv+"=proxy", captureRealEnv+"="+bin, captureFileEnv+"="+file)
	t.Cleanup(func() {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("capture: %v", err)
			return
		}
		repl := []string{r.workdir, captureWorkdir, r.home, captureHome}
		if len(r.home) > len(r.workdir) {
			repl = []string{r.home, captureHome, r.workdir, captureWorkdir}
		}
		text := strings.NewReplacer(repl...).Replace(string(b))
		dest := filepath.Join("..", "codex", "testdata", "live", name+".jsonl")
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			t.Fatal(err)
		}
		header := fmt.Sprintf("# recorded by e2e/live_codex_test.go (CLINVOKE_CAPTURE=1, %s)\n# %s %s\n", t.Name(), r.cli.name, cliVersion(t, r.cli))
		if err := os.WriteFile(dest, []byte(header+text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", dest)
	})
	return r.cli.new(invoker.Options{Binary: os.Args[0], Env: env})
}

func (r *rig) sessionRequest(perm invoker.Permission) invoker.SessionRequest {
	return invoker.SessionRequest{Workdir: r.workdir, Model: r.cli.model, Permission: perm}
}

// codexDelta: text as it is written, for Invoke (which Deltas routes to
// the app-server; exec would print the message whole) and for a session
// turn; the whole message follows its deltas, and the Result is a turn's.
func codexDelta(t *testing.T, r *rig) {
	t.Run("invoke", func(t *testing.T) {
		inv := codexInvoker(t, r, "delta-invoke")
		r.srv.Enqueue(pacedAnswer())
		onEvent, got := recordEvents()
		req := r.request("stream the answer")
		req.Deltas, req.OnEvent = true, onEvent
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := inv.Invoke(ctx, req)
		if ps := r.survivors(); len(ps) > 0 {
			t.Errorf("processes of the run alive after Invoke returned:\n%s", strings.Join(ps, "\n"))
		}
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		checkDeltas(t, got(), longAnswer)
		if strings.TrimSpace(res.Text) != strings.TrimSpace(longAnswer) || res.SessionID == "" || res.Usage.InputTokens == 0 || res.ExitCode != 0 {
			t.Errorf("Result = %s, want the answer, the thread id, usage and exit code 0", jsonString(res))
		}
		for _, e := range got() {
			if e.ev.Kind == invoker.KindSession && e.ev.SessionID != res.SessionID {
				t.Errorf("session event %q, Result.SessionID %q", e.ev.SessionID, res.SessionID)
			}
		}
	})
	t.Run("session", func(t *testing.T) {
		req := r.sessionRequest(invoker.ReadOnly)
		req.Deltas = true
		s := r.openSession(t, codexInvoker(t, r, "delta-session"), req)
		r.srv.Enqueue(pacedAnswer())
		onEvent, got := recordEvents()
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "stream the answer", OnEvent: onEvent})
		if err != nil {
			t.Fatalf("Turn() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		checkDeltas(t, got(), longAnswer)
		if strings.TrimSpace(res.Text) != strings.TrimSpace(longAnswer) || res.SessionID != s.ID() {
			t.Errorf("Result = %s, want the answer and the session's thread", jsonString(res))
		}
	})
}

// codexSteer: a message sent with Steer while the model streams its
// answer reaches the model with the turn's next request, and the turn
// ends with the answer to it.
func codexSteer(t *testing.T, r *rig) {
	req := r.sessionRequest(invoker.ReadOnly)
	req.Deltas = true
	s := r.openSession(t, codexInvoker(t, r, "steer"), req)
	const marker = "STEER-7f3a also mention the weather"
	r.srv.Enqueue(pacedAnswer(), fakemodel.Answer("steered answer"))
	streaming := make(chan struct{})
	var once sync.Once
	type result struct {
		res *invoker.Result
		err error
	}
	done := make(chan result, 1)
	ctx := turnCtx(t)
	go func() {
		res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "tell me something", OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindDelta {
				once.Do(func() { close(streaming) })
			}
		}})
		done <- result{res, err}
	}()
	select {
	case <-streaming:
	case out := <-done:
		t.Fatalf("the turn ended before the model streamed: %v", out.err)
	}
	if err := s.Steer(ctx, marker); err != nil {
		t.Fatalf("Steer() error = %v", err)
	}
	out := <-done
	if out.err != nil {
		t.Fatalf("Turn() error = %v; stderr tail:\n%s", out.err, out.res.Stderr)
	}
	reqs := r.srv.Scripted()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the turn's, then the one carrying the steer)", len(reqs))
	}
	if reqs[0].Contains("STEER-7f3a") || !reqs[1].Contains("STEER-7f3a") || !reqs[1].Contains("tell me something") {
		t.Errorf("the steering message is not in the turn's next model request alone")
	}
	if out.res.Text != "steered answer" {
		t.Errorf("Result.Text = %q, want the answer to the steered request", out.res.Text)
	}
	if err := s.Steer(ctx, "too late"); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("Steer() between turns = %v, want ErrInvalidRequest", err)
	}
}

// codexSwitchModel: a turn's Model switches the session's model from that
// turn on, as the model requests show.
func codexSwitchModel(t *testing.T, r *rig) {
	s := r.openSession(t, codexInvoker(t, r, "switch-model"), r.sessionRequest(invoker.ReadOnly))
	r.srv.Enqueue(fakemodel.Answer("one"), fakemodel.Answer("two"), fakemodel.Answer("three"))
	const other = "gpt-5.4"
	ctx := turnCtx(t)
	for i, tr := range []invoker.TurnRequest{{Prompt: "first"}, {Prompt: "second", Model: other}, {Prompt: "third"}} {
		if res, err := s.Turn(ctx, tr); err != nil {
			t.Fatalf("turn %d: Turn() error = %v; stderr tail:\n%s", i+1, err, res.Stderr)
		}
	}
	reqs := r.srv.Scripted()
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3", len(reqs))
	}
	for i, want := range []string{r.cli.model, other, other} {
		if got := modelOf(t, reqs[i]); got != want {
			t.Errorf("turn %d asked for model %q, want %q", i+1, got, want)
		}
	}
}

// codexSwitchPermission: in a session opened at WorkspaceWrite, a turn
// lowered to ReadOnly cannot write the workdir, one raised back to
// WorkspaceWrite can, and one lowered again cannot: the disk says so.
func codexSwitchPermission(t *testing.T, r *rig) {
	s := r.openSession(t, codexInvoker(t, r, "switch-permission"), r.sessionRequest(invoker.WorkspaceWrite))
	ctx := turnCtx(t)
	for i, step := range []struct {
		perm  invoker.Permission
		file  string
		wrote bool
	}{
		{invoker.ReadOnly, "ro1.txt", false},
		{invoker.WorkspaceWrite, "ww.txt", true},
		{invoker.ReadOnly, "ro2.txt", false},
	} {
		r.srv.Enqueue(fakemodel.Shell("touch "+step.file), fakemodel.EchoToolResult("done: "))
		res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "make " + step.file, Permission: step.perm})
		if err != nil {
			t.Fatalf("turn %d: Turn() error = %v; stderr tail:\n%s", i+1, err, res.Stderr)
		}
		_, statErr := os.Stat(filepath.Join(r.workdir, step.file))
		if wrote := statErr == nil; wrote != step.wrote {
			t.Errorf("turn %d at %s: %s written = %v, want %v (tool said %q)", i+1, step.perm, step.file, wrote, step.wrote, res.Text)
		}
	}
	if _, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "more", Permission: invoker.Unlimited}); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("Turn() above the session's ceiling = %v, want ErrInvalidRequest", err)
	}
}

// codexFork: a fork's first model request carries the original thread's
// history; the fork has its own id, and the original thread goes on
// without the fork's turn.
func codexFork(t *testing.T, r *rig) {
	inv := codexInvoker(t, r, "fork")
	r.srv.Enqueue(fakemodel.Answer("answer ORIG-ONE"), fakemodel.Answer("answer FORK-TWO"), fakemodel.Answer("answer ORIG-THREE"))
	ctx := context.Background()
	first, err := r.invoke(ctx, r.request("prompt ORIG-ONE"))
	if err != nil {
		t.Fatalf("first Invoke() error = %v", err)
	}
	orig := first.SessionID
	req := r.request("prompt FORK-TWO")
	req.SessionID, req.Fork = orig, true
	fctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	forked, err := inv.Invoke(fctx, req)
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes of the fork alive after Invoke returned:\n%s", strings.Join(ps, "\n"))
	}
	if err != nil {
		t.Fatalf("fork Invoke() error = %v; stderr tail:\n%s", err, forked.Stderr)
	}
	if forked.SessionID == "" || forked.SessionID == orig || forked.Text != "answer FORK-TWO" {
		t.Errorf("fork Result = %s, want a new thread than %s and the fork's answer", jsonString(forked), orig)
	}
	req = r.request("prompt ORIG-THREE")
	req.SessionID = orig
	again, err := r.invoke(ctx, req)
	if err != nil {
		t.Fatalf("resumed Invoke() error = %v", err)
	}
	if again.SessionID != orig || again.Text != "answer ORIG-THREE" {
		t.Errorf("resumed Result = %s, want thread %s and its answer", jsonString(again), orig)
	}
	reqs := r.srv.Scripted()
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3", len(reqs))
	}
	if f := reqs[1]; !f.Contains("prompt ORIG-ONE") || !f.Contains("answer ORIG-ONE") || !f.Contains("prompt FORK-TWO") {
		t.Errorf("the fork's first model request does not carry the original thread's history")
	}
	if o := reqs[2]; !o.Contains("prompt ORIG-ONE") || !o.Contains("prompt ORIG-THREE") || o.Contains("FORK-TWO") {
		t.Errorf("the original thread's next request does not hold only its own history (fork's turn present: %v)", o.Contains("FORK-TWO"))
	}
}

// rateHeaders are the headers Codex reads into a rate-limit snapshot
// (codex-api rate_limits.rs): the primary window used up, resetting at
// reset, the secondary at 42.5%.
func rateHeaders(reset time.Time) http.Header {
	at := strconv.FormatInt(reset.Unix(), 10)
	return http.Header{
		"X-Codex-Primary-Used-Percent":     {"100"},
		"X-Codex-Primary-Window-Minutes":   {"300"},
		"X-Codex-Primary-Reset-At":         {at},
		"X-Codex-Secondary-Used-Percent":   {"42.5"},
		"X-Codex-Secondary-Window-Minutes": {"10080"},
		"X-Codex-Secondary-Reset-At":       {at},
	}
}

// codexRateLimit: Codex is allowed one retry. In a session, the model's
// answer to a first turn carries rate-limit headers, which the turn
// reports as the windows' state; the next turn's request is refused with
// 429, retried once and refused again: the turn
// reports the retry and fails with a LimitError that resets when the
// used-up window does. exec reports the retry and the LimitError, with no
// reset: it relays no snapshot.
func codexRateLimit(t *testing.T, r *rig) {
	cfg := filepath.Join(r.home, ".codex", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A 429 is retried as a failed stream (stream_max_retries), which
	// Codex reports as "Reconnecting... 1/1".
	one := strings.NewReplacer("request_max_retries = 0", "request_max_retries = 1",
		"stream_max_retries = 0", "stream_max_retries = 1").Replace(string(b))
	if strings.Count(one, "_max_retries = 1") != 2 {
		t.Fatal("the rig's config.toml no longer sets request_max_retries and stream_max_retries to 0")
	}
	writeFile(t, cfg, one)
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	// Codex retries a 429 only when it says when to (measured with
	// 0.169.0: without Retry-After the turn fails at once).
	refused := fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "Rate limit reached for requests",
		Header: http.Header{"Retry-After": {"1"}}}
	checkRetry := func(t *testing.T, evs []timedEvent) {
		t.Helper()
		var retries []invoker.Retry
		for _, e := range evs {
			if e.ev.Kind == invoker.KindWarning && e.ev.Retry != nil {
				retries = append(retries, *e.ev.Retry)
			}
		}
		if len(retries) != 1 || retries[0].Attempt != 1 || retries[0].MaxAttempts != 1 || retries[0].HTTPStatus != http.StatusTooManyRequests {
			t.Errorf("retries = %+v, want one: attempt 1 of 1 after a 429", retries)
		}
	}
	checkLimit := func(t *testing.T, err error, session string, resets time.Time) {
		t.Helper()
		var le *invoker.LimitError
		if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) {
			t.Fatalf("error = %v, want a *LimitError matching ErrRateLimited", err)
		}
		if le.SessionID != session || !le.ResetsAt.Equal(resets) {
			t.Errorf("LimitError = {SessionID %q, ResetsAt %v}, want {%q, %v}", le.SessionID, le.ResetsAt, session, resets)
		}
	}

	t.Run("session", func(t *testing.T) {
		s := r.openSession(t, codexInvoker(t, r, "rate-limit"), r.sessionRequest(invoker.ReadOnly))
		r.srv.Enqueue(fakemodel.Turn{Text: "plenty left", Header: rateHeaders(reset)}, refused, refused)
		ctx := turnCtx(t)
		onEvent, got := recordEvents()
		if _, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "first", OnEvent: onEvent}); err != nil {
			t.Fatalf("first Turn() error = %v", err)
		}
		limits := map[string]invoker.RateLimit{}
		for _, e := range got() {
			if e.ev.Kind == invoker.KindRateLimit {
				limits[e.ev.RateLimit.Limit] = *e.ev.RateLimit
			}
		}
		if p := limits["primary"]; p.UsedPercent != 100 || !p.ResetsAt.Equal(reset) {
			t.Errorf("primary rate limit = %+v, want 100%% resetting at %v", p, reset)
		}
		// Codex rounds the percentage it relays (42.5 became 43).
		if s := limits["secondary"]; s.UsedPercent < 42 || s.UsedPercent > 43 || !s.ResetsAt.Equal(reset) {
			t.Errorf("secondary rate limit = %+v, want about 42.5%% resetting at %v", s, reset)
		}

		onEvent, got = recordEvents()
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "second", OnEvent: onEvent})
		checkRetry(t, got())
		checkLimit(t, err, s.ID(), reset)
		select {
		case <-s.Done():
			t.Errorf("the session ended after a rate-limited turn: %v", s.Err())
		default:
		}
	})
	t.Run("invoke", func(t *testing.T) {
		r.srv.Enqueue(refused, refused)
		onEvent, got := recordEvents()
		req := r.request("first")
		req.OnEvent = onEvent
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := codexInvoker(t, r, "rate-limit-exec").Invoke(ctx, req)
		if ps := r.survivors(); len(ps) > 0 {
			t.Errorf("processes of the run alive after Invoke returned:\n%s", strings.Join(ps, "\n"))
		}
		checkRetry(t, got())
		checkLimit(t, err, res.SessionID, time.Time{})
	})
}
