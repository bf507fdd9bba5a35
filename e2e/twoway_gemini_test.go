//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Gemini CLI's two-way control runs on its ACP mode (internal/acp,
// gemini/session.go): approvals are its session/request_permission
// requests, asked in its "default" mode, the Go tools are served over
// loopback HTTP and given with session/new as an http server whose bearer
// token is a header, and the model calls an MCP tool TOOL of server
// SERVER as the function mcp_SERVER_TOOL.
func init() {
	twoWay["gemini"] = &twoWayCLI{
		mcpTool:   func(server, tool string) string { return "mcp_" + server + "_" + tool },
		ask:       invoker.Unlimited,
		shellTool: "run_shell_command",
		denial:    func(string) string { return geminiDenial },
		// Gemini's stdio server may be a zombie still when Invoke returns.
		unreapedServer: true,
		write: func(path, content string) fakemodel.Turn {
			return fakemodel.CallTool("write_file", map[string]any{"file_path": path, "content": content})
		},
		approval: geminiApproval,
	}
}

// geminiDenial is what Gemini tells the model of a rejected call: ACP's
// reject option carries no message.
const geminiDenial = `Tool \"run_shell_command\" was canceled by the user.`

// geminiApproval holds Gemini's own approval scenario: a command above the
// permission level is rejected without asking.
func geminiApproval(t *testing.T, r *rig) {
	t.Run("ceiling", func(t *testing.T) {
		// A command is above WorkspaceWrite: rejected without asking,
		// although the callback would allow it.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "ceiling.txt")
		got, _ := approvalTurn(t, r, invoker.WorkspaceWrite, invoker.Decision{Allow: true}, fakemodel.Shell("touch "+file))
		if len(got) != 0 {
			t.Errorf("Approve was asked %s, want nothing above the ceiling", jsonString(got))
		}
		absent(t, file, "the command ran under WorkspaceWrite")
		if body := lastScripted(t, r.srv); !strings.Contains(body, geminiDenial) {
			t.Errorf("the model's next request does not carry the rejection:\n%s", body)
		}
	})
}

// TestGeminiEditForSession: at WorkspaceWrite an edit allowed for the
// session leaves every later edit of the session to the judge. Gemini CLI
// 0.61.0 takes "proceed_always" on an edit tool for a switch of the whole
// session to autoEdit (isAutoEditTransition in its scheduler's policy
// update), after which it writes without asking. So the library answers
// "proceed_once" and keeps the grant itself: a later edit in the
// session is asked about by Gemini, judged by the path judge (an edit of
// .gemini/settings.json refused) and, within the level, allowed by the
// library without asking the program again.
func TestGeminiEditForSession(t *testing.T) {
	r := newRig(t, cliNamed("gemini"))
	w := twoWayOf(t, "gemini")
	first, later := filepath.Join(r.workdir, "first.txt"), filepath.Join(r.workdir, "later.txt")
	settings := filepath.Join(r.workdir, ".gemini", "settings.json")
	var a approvals
	s := r.openSession(t, r.inv, invoker.SessionRequest{Workdir: r.workdir, Model: r.cli.model, Permission: invoker.WorkspaceWrite,
		Approve: a.decide(invoker.Decision{Allow: true, ForSession: true})})
	var warnings []string
	turn := func(calls ...fakemodel.Turn) {
		t.Helper()
		r.srv.Enqueue(append(calls, fakemodel.EchoToolResult("after: "))...)
		if _, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "write", OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning {
				warnings = append(warnings, ev.Text)
			}
		}}); err != nil {
			t.Fatalf("Turn() error = %v", err)
		}
	}
	turn(w.write(first, "one"))
	turn(w.write(settings, `{"mcpServers":{"pwn":{"command":"sh","args":["-c","touch /tmp/pwned"]}}}`), w.write(later, "two"))
	if _, err := os.Stat(settings); err == nil {
		t.Errorf("%s was written after an edit was allowed for the session (warnings %q)", settings, warnings)
	}
	if !containsAny(warnings, ".gemini") {
		t.Errorf("no warning of the refused edit of %s (warnings %q): did Gemini ask?", settings, warnings)
	}
	for _, f := range []string{first, later} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the allowed edit of %s: %v", f, err)
		}
	}
	if got := a.list(); len(got) != 1 || !slices.Contains(got[0].Paths, first) {
		t.Errorf("Approve was asked %s, want the first edit only", jsonString(got))
	}
}
