//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestApprovalForSession: a command allowed for the session is not asked
// about again in the session's later turns, as the CLI scopes it: Codex
// the same command, Claude Code and Gemini CLI the same tool (so a second,
// different command runs without a question). Both commands run.
func TestApprovalForSession(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		commands := []string{"touch first.txt", "touch second.txt"}
		perm := invoker.Unlimited // Claude Code and Gemini CLI ask about shell commands only there
		if r.cli.name == "codex" {
			commands[1] = commands[0] // Codex remembers the command
			perm = invoker.WorkspaceWrite
		}
		var mu sync.Mutex
		var asked []string
		base := r.request("x")
		s, err := r.inv.OpenSession(context.Background(), invoker.SessionRequest{
			Workdir: r.workdir, Permission: perm, Model: base.Model, Env: base.Env,
			Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
				mu.Lock()
				asked = append(asked, a.Command)
				mu.Unlock()
				return invoker.Decision{Allow: true, ForSession: true}
			},
		})
		if err != nil {
			t.Fatalf("OpenSession() error = %v", err)
		}
		defer s.Close()
		for _, c := range commands {
			r.srv.Enqueue(fakemodel.Shell(c), fakemodel.EchoToolResult("after: "))
			if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "run it"}); err != nil {
				t.Fatalf("Turn(%s) error = %v", c, err)
			}
			f := strings.TrimPrefix(c, "touch ")
			if _, err := os.Stat(filepath.Join(r.workdir, f)); err != nil {
				t.Errorf("%s: %v, want the command to have run", f, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != 1 || !strings.Contains(asked[0], commands[0]) {
			t.Errorf("Approve was asked about %q, want only the first command", asked)
		}
		if left := r.survivors(); len(left) > 0 {
			t.Errorf("processes survived the session: %v", left)
		}
	})
}
