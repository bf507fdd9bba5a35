//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// quick is how long a CLI may take to report a model error or to stop
// after cancellation: with retries off they all answer within seconds
// (Gemini, the slowest to start, needs about 2.5 s on a free machine and
// 7 s beside 2 × nproc CPU hogs). It grows with testenv.Scale on slower
// machines.
var quick = time.Duration(float64(20*time.Second) * testenv.Scale())

// ready bounds the wait for a scenario's moment to cancel (a model request
// arrived, a tool runs): a guard against a run that never gets there.
var ready = testenv.Timeout(testenv.Hang)

func TestAnswer(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		r.srv.Enqueue(fakemodel.Answer("hi there friend"))
		res, err := r.invoke(context.Background(), r.request("say hi"))
		if err != nil {
			t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
		}
		if res.Text != "hi there friend" {
			t.Errorf("Result.Text = %q, want %q", res.Text, "hi there friend")
		}
		if res.SessionID == "" || res.ExitCode != 0 {
			t.Errorf("Result = %s, want a session id and exit code 0", jsonString(res))
		}
		if n := len(r.srv.Scripted()); n != 1 {
			t.Errorf("the CLI asked the model %d times, want 1", n)
		}
	})
}

func TestToolCall(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		r.srv.Enqueue(fakemodel.Shell("echo hello"), fakemodel.EchoToolResult("done: "))
		req := r.request("run echo hello")
		req.Permission = r.cli.shell
		var mu sync.Mutex
		var calls, results []*invoker.Tool
		req.OnEvent = func(ev invoker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case invoker.KindToolCall:
				calls = append(calls, ev.Tool)
			case invoker.KindToolResult:
				results = append(results, ev.Tool)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v, want nil; stderr tail:\n%s", err, res.Stderr)
		}
		// The answer echoes what the tool printed: the tool really ran.
		if !strings.HasPrefix(res.Text, "done: ") || !strings.Contains(res.Text, "hello") {
			t.Errorf("Result.Text = %q, want %q followed by the tool's output hello", res.Text, "done: ")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(calls) == 0 || len(results) == 0 {
			t.Fatalf("saw %d tool calls and %d tool results, want at least one of each", len(calls), len(results))
		}
		if !strings.Contains(string(calls[0].Input)+calls[0].Name, "echo hello") {
			t.Errorf("tool call = %s, want the command echo hello", jsonString(calls[0]))
		}
		if !strings.Contains(results[len(results)-1].Output, "hello") {
			t.Errorf("tool result = %s, want output hello", jsonString(results[len(results)-1]))
		}
	})
}

func TestResume(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		first := invokeToResume(t, r)
		req := r.request("second prompt")
		req.SessionID = first.SessionID
		second, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("resumed Invoke() error = %v, want nil; stderr tail:\n%s", err, second.Stderr)
		}
		if second.Text != "second answer" || second.SessionID != first.SessionID {
			t.Errorf("resumed Result = %s, want text %q in session %s", jsonString(second), "second answer", first.SessionID)
		}
		r.checkCarriesFirstTurn(t, "the resumed turn's request")
	})
}

// cancelWhen runs req, cancels it once isReady reports true, and checks
// that Invoke returns the context's error within quick, with the session
// id, and (through r.invoke) that no process of the run survives.
func cancelWhen(t *testing.T, r *rig, req invoker.Request, what string, isReady func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fired := cancelWhenReady(ctx, cancel, ready, isReady)
	res, err := r.invoke(ctx, req)
	var at time.Time
	select {
	case at = <-fired:
	default:
		t.Fatalf("Invoke() returned before %s (no cancel): %v; stderr tail:\n%s", what, err, res.Stderr)
	}
	if stop := time.Since(at); stop > quick {
		t.Errorf("Invoke() took %v to return after the cancel, want less than %v", stop, quick)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Invoke() error = %v, want context.Canceled (cancelled while %s)", err, what)
	}
	if res.SessionID == "" {
		t.Errorf("cancelled Result has no session id, want the one the CLI reported before the cancel")
	}
}

// cancelWhenReady polls isReady until it reports true, then cancels ctx
// and sends the time of the cancel on the returned channel. It gives up,
// sending nothing, after within or once ctx is done: the caller then
// finds the channel empty.
func cancelWhenReady(ctx context.Context, cancel context.CancelFunc, within time.Duration, isReady func() bool) <-chan time.Time {
	fired := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(within)
		for !isReady() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		fired <- time.Now()
		cancel()
	}()
	return fired
}

func TestCancelWhileModelStalls(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		r.srv.Enqueue(fakemodel.Stall("partial "))
		// Cancel a moment after the model request arrived, once the stalled
		// answer's first bytes are on their way.
		var seen time.Time
		cancelWhen(t, r, r.request("say hi"), "the model stalls", func() bool {
			if seen.IsZero() && len(r.srv.Scripted()) > 0 {
				seen = time.Now()
			}
			return !seen.IsZero() && time.Since(seen) > 300*time.Millisecond
		})
	})
}

// longTool is a tool command that runs until killed and that every CLI
// runs in its read-only mode: Claude Code 2.1.330 and newer refuse a
// standalone `sleep` (and even `sleep 300 && echo`) as a way to wait, and
// let `tail` read only files in the working directory.
const longTool = "tail -f follow.log"

func TestCancelWhileToolRuns(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		if err := os.WriteFile(filepath.Join(r.workdir, "follow.log"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r.srv.Enqueue(fakemodel.Shell(longTool), fakemodel.Answer("unused"))
		req := r.request("follow")
		req.Permission = r.cli.shell
		// All three CLIs start tools in sessions of their own: the tool
		// must be found and killed all the same.
		cancelWhen(t, r, req, "a tool runs "+longTool, func() bool { return r.toolRunning(longTool) })
	})
}

func TestModelErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error // a sentinel the error must match, or nil for any typed error
	}{
		{401, invoker.ErrAuthRequired},
		{429, invoker.ErrRateLimited},
		{500, nil},
	} {
		t.Run(strings.ReplaceAll(fakemodelStatus(tc.status), " ", "_"), func(t *testing.T) {
			forEachCLI(t, func(t *testing.T, r *rig) {
				r.srv.Enqueue(fakemodel.Fail(tc.status, "fake "+fakemodelStatus(tc.status)))
				start := time.Now()
				res, err := r.invoke(context.Background(), r.request("say hi"))
				if took := time.Since(start); took > quick {
					t.Errorf("Invoke() took %v to report HTTP %d, want less than %v", took, tc.status, quick)
				}
				if err == nil {
					t.Fatalf("Invoke() error = nil, want one for HTTP %d; Result = %s", tc.status, jsonString(res))
				}
				var se *invoker.StreamError
				var ee *invoker.ExitError
				if !errors.As(err, &se) && !errors.As(err, &ee) {
					t.Errorf("Invoke() error = %v (%T), want a *StreamError or *ExitError", err, err)
				}
				if tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("Invoke() error = %v, want one matching %v", err, tc.want)
				}
				if n := len(r.srv.Scripted()); n != 1 {
					t.Errorf("the CLI asked the model %d times, want 1 (retries off)", n)
				}
			})
		})
	}
}

func fakemodelStatus(code int) string {
	switch code {
	case 401:
		return "401 unauthorized"
	case 429:
		return "429 rate limited"
	}
	return "500 server error"
}
