package codex_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
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

// A missing image is refused before any process starts, whichever mode
// the request runs in: the one-shot exec, or the app-server that Deltas
// and two-way control take (ErrInvalidRequest promises "before any
// process starts").
func TestImagesCheckedBeforeStart(t *testing.T) {
	img := t.TempDir() + "/missing.png"
	tests := []struct {
		name string
		edit func(*invoker.Request)
	}{
		{"exec", func(*invoker.Request) {}},
		{"app-server for Deltas", func(r *invoker.Request) { r.Deltas = true }},
		{"app-server for Approve", func(r *invoker.Request) {
			r.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{} }
		}},
		{"app-server for MCPServers", func(r *invoker.Request) {
			r.MCPServers = []invoker.MCPServer{{Name: "docs", URL: "http://127.0.0.1:9/mcp"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeagent.Script{Flavor: fakeagent.Codex, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
			inv := codex.New(invoker.Options{Binary: os.Args[0]})
			req := invoker.Request{Prompt: "what is in the picture?", Workdir: t.TempDir(), Env: s.Env(), Images: []string{img}}
			tt.edit(&req)
			res, err := inv.Invoke(context.Background(), req)
			if !errors.Is(err, invoker.ErrInvalidRequest) || !strings.Contains(err.Error(), img) {
				t.Errorf("Invoke() error = %v, want ErrInvalidRequest naming %s", err, img)
			}
			if res == nil || res.ExitCode != -1 {
				t.Errorf("Invoke() Result = %+v, want ExitCode -1 (nothing ran)", res)
			}
			if entries, _ := os.ReadDir(s.RecordDir); len(entries) > 0 {
				t.Errorf("the CLI started for a request with a missing image: its record holds %d files", len(entries))
			}
		})
	}
}

// With Approve and without Deltas (the app-server, whose text comes as
// deltas that are not delivered), the answer written before the model
// stalls reaches a KindMessage event before the stall, as it does through
// codex exec: progress built from the events shows the partial answer the
// Result holds. The caller here cancels once it has seen the message;
// before, none came, and the run waited for its deadline.
func TestMessageBeforeStallWithApprove(t *testing.T) {
	const answer = "The answer so far."
	for _, approve := range []bool{false, true} {
		t.Run(fmt.Sprint("approve=", approve), func(t *testing.T) {
			s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: answer, Chunks: 3, StallFor: time.Hour, Tag: fakeagent.NewTag()}
			inv := codex.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
			defer cancel()
			var messages []string
			req := invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), OnEvent: func(ev invoker.Event) {
				if ev.Kind == invoker.KindMessage {
					messages = append(messages, ev.Text)
					cancel()
				}
			}}
			if approve {
				req.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
			}
			res, err := inv.Invoke(ctx, req)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Invoke() error = %v, want context.Canceled once the message came", err)
			}
			// (codex exec prints growing prefixes of the answer.)
			if len(messages) == 0 || messages[len(messages)-1] != res.Text || res.Text == "" || !strings.HasPrefix(answer, res.Text) {
				t.Errorf("messages before the stall %q, Result.Text %q; want the answer %q as far as it came in both", messages, res.Text, answer)
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("processes survived: %v", left)
			}
		})
	}
}

// A turn that ends while a message is being written (the model stalled
// mid-message, and the idle timeout interrupted the turn) delivers the
// message as far as it came, as a KindMessage before the turn's done
// event: what a consumer of whole messages sees is what Result.Text
// holds, with and without Deltas.
func TestCutMessageDelivered(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		t.Run(fmt.Sprint("deltas=", deltas), func(t *testing.T) {
			s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: "partial words", Chunks: 2, Tag: fakeagent.NewTag()}
			inv := codex.New(invoker.Options{Binary: os.Args[0], IdleTimeout: 300 * time.Millisecond})
			sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env(), Deltas: deltas})
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			defer sess.Close()
			var kinds []invoker.EventKind
			var message string
			res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "stall mid-message " + fakeagent.PromptStall, OnEvent: func(ev invoker.Event) {
				kinds = append(kinds, ev.Kind)
				if ev.Kind == invoker.KindMessage {
					message = ev.Text
				}
			}})
			if !errors.Is(err, invoker.ErrIdleTimeout) {
				t.Errorf("Turn() error = %v, want ErrIdleTimeout", err)
			}
			if res.Text != "partial words" || message != res.Text {
				t.Errorf("message event %q, Result.Text %q; want the message as far as it came in both", message, res.Text)
			}
			if i, j := slices.Index(kinds, invoker.KindMessage), slices.Index(kinds, invoker.KindDone); i < 0 || j < i {
				t.Errorf("event kinds %v, want the message before the done event", kinds)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
		})
	}
}
