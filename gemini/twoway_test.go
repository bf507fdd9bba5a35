package gemini

import (
	"context"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"run_shell_command__run_shell_command_1795567170161_0", "run_shell_command"},
		{"mcp_gotools_greet__mcp_gotools_greet_1795567170161_0", "mcp_gotools_greet"},
		{"mcp_gotools_greet-1795567170161-1", "mcp_gotools_greet"},
		{"read-many-files-1795567170161-2", "read-many-files"},
		{"resolve-prompt-a.txt-abc", ""},
		{"x-1", ""},
		{"plain", ""},
	} {
		if got := toolName(tc.id, "execute", "t"); got != tc.want {
			t.Errorf("toolName(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestAllowAlways(t *testing.T) {
	mcp := []string{"proceed_always_server", "proceed_always_tool", "proceed_always_and_save"}
	for _, tc := range []struct {
		ids    []string
		server bool
		want   string
	}{
		{mcp, false, "proceed_always_tool"},
		{mcp, true, "proceed_always_server"},
		{[]string{"proceed_always", "proceed_always_and_save"}, false, "proceed_always"},
		{[]string{"proceed_always", "proceed_always_and_save"}, true, "proceed_always"},
		{[]string{"proceed_always_and_save"}, false, ""},
		{[]string{"later", "proceed_always_and_save"}, false, "later"},
	} {
		if got := allowAlways(tc.ids, tc.server); got != tc.want {
			t.Errorf("allowAlways(%q, %v) = %q, want %q", tc.ids, tc.server, got, tc.want)
		}
	}
}

// TestACPApprovals checks Gemini's session with an Approve callback: it
// stays in the default mode at every level (no yolo, which asks nothing),
// its turns' switches of level change no mode, and a shell command under
// Unlimited goes to the program while one under WorkspaceWrite is
// rejected.
func TestACPApprovals(t *testing.T) {
	approve := func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{} }
	const shell = `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S1","options":[` +
		`{"optionId":"proceed_always","kind":"allow_always"},{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],` +
		`"toolCall":{"toolCallId":"run_shell_command__run_shell_command_1_0","title":"touch made.txt","kind":"execute"}}}`
	for _, tc := range []struct {
		perm, turn invoker.Permission
		ask        bool
	}{
		{invoker.Unlimited, "", true},
		{invoker.ReadOnly, invoker.Unlimited, true},
		{invoker.Unlimited, invoker.WorkspaceWrite, false},
	} {
		p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: tc.perm, Approve: approve})
		p.Open()
		acpDecode(t, p, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
		st := acpDecode(t, p, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","modes":{"currentModeId":"default"}}}`)
		if !st.Ready || len(st.Write) != 0 {
			t.Fatalf("%s: after session/new, Step = %+v; want ready in the default mode", tc.perm, st)
		}
		lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "p", Permission: tc.turn})
		if err != nil || len(lines) != 1 || !strings.Contains(string(lines[0]), `"session/prompt"`) {
			t.Fatalf("%s→%s: StartTurn() = %q, %v; want the prompt and no switch", tc.perm, tc.turn, lines, err)
		}
		st = acpDecode(t, p, shell)
		if asked := len(st.Approvals) == 1; asked != tc.ask {
			t.Errorf("%s→%s: asked the program %v, want %v (wrote %q)", tc.perm, tc.turn, asked, tc.ask, st.Write)
		}
		if !tc.ask && (len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"optionId":"cancel"`)) {
			t.Errorf("%s→%s: answered %q, want the rejection", tc.perm, tc.turn, st.Write)
		}
		if tc.ask {
			a := st.Approvals[0]
			if a.Request.Kind != "command" || a.Request.Command != "touch made.txt" || a.Request.Tool.Name != "run_shell_command" {
				t.Errorf("%s: approval %+v, want the command touch made.txt of run_shell_command", tc.perm, a.Request)
			}
			if got := a.Answer(invoker.Decision{Allow: true, ForSession: true}); len(got) != 1 || !strings.Contains(string(got[0]), `"optionId":"proceed_always"`) {
				t.Errorf("%s: for the session answered %q, want proceed_always", tc.perm, got)
			}
		}
	}
}
