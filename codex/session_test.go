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
