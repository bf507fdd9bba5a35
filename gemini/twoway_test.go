package gemini

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

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

// TestACPWorkspaceWrite checks that a session at WorkspaceWrite without a
// callback stays in Gemini's default mode (autoEdit would write every
// edit Gemini itself allows, ~/.gemini/GEMINI.md included, without
// asking) and answers each edit by its path: inside the working directory
// allowed, elsewhere rejected.
func TestACPWorkspaceWrite(t *testing.T) {
	w := t.TempDir()
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: w, Permission: invoker.WorkspaceWrite})
	p.Open()
	acpDecode(t, p, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	st := acpDecode(t, p, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","modes":{"currentModeId":"default"}}}`)
	if !st.Ready || len(st.Write) != 0 {
		t.Fatalf("after session/new, Step = %+v; want ready in the default mode, no set_mode", st)
	}
	if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	edit := func(id, path string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"S1","options":[` +
			`{"optionId":"proceed_always","kind":"allow_always"},{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],` +
			`"toolCall":{"toolCallId":"write_file__write_file_1_0","title":"Writing to f","locations":[{"path":"` + path + `"}],"kind":"edit"}}}`
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(w, "notes.md"), `"optionId":"proceed_once"`},
		{filepath.Join(t.TempDir(), ".gemini", "GEMINI.md"), `"optionId":"cancel"`},
		{filepath.Join(w, ".gemini", "GEMINI.md"), `"optionId":"cancel"`},
	} {
		st := acpDecode(t, p, edit("9", tc.path))
		if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), tc.want) {
			t.Errorf("edit of %s answered %q, want %s", tc.path, st.Write, tc.want)
		}
	}
}

// TestApprovalForm checks what an Approval tells a policy of Gemini CLI's
// requests: the workdir; a command's Cwd (Gemini's shell runs in the
// working directory) and an edit's Paths absolute and resolved, a
// relative location taken in the working directory; and a server's tool
// by the names of the request's server and of the tool, from the call's
// id (mcp_SERVER_TOOL), the server's "_" included, never from the title.
func TestApprovalForm(t *testing.T) {
	w, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	request := func(toolCall string) string {
		return `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S1","options":[` +
			`{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],"toolCall":` + toolCall + `}}`
	}
	approve := func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{} }
	for _, tc := range []struct {
		name, toolCall, kind, cwd string
		paths                     []string
		server, tool              string
	}{
		{"command", `{"toolCallId":"run_shell_command__1","title":"make","kind":"execute"}`, invoker.ApprovalCommand, w, nil, "", ""},
		{"edit", `{"toolCallId":"write_file__1","title":"Writing to a.txt","locations":[{"path":"./sub/../a.txt"}],"kind":"edit"}`,
			invoker.ApprovalFileChange, "", []string{filepath.Join(w, "a.txt")}, "", ""},
		{"server tool", `{"toolCallId":"mcp_go_tools_record__mcp_go_tools_record_1_0","title":"x (tools MCP Server)","kind":"other"}`,
			invoker.ApprovalMCPTool, "", nil, "go_tools", "record"},
	} {
		p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: w, Permission: invoker.Unlimited, Approve: approve,
			MCPServers: []invoker.MCPServer{{Name: "go_tools", Command: "srv"}, {Name: "tools", Command: "srv"}}})
		p.Open()
		acpDecode(t, p, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"gemini-cli"}}}`)
		acpDecode(t, p, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","modes":{"currentModeId":"default"}}}`)
		if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		st := acpDecode(t, p, request(tc.toolCall))
		if len(st.Approvals) != 1 {
			t.Fatalf("%s: wrote %q, want the program asked", tc.name, st.Write)
		}
		a := st.Approvals[0].Request
		if a.Kind != tc.kind || a.Workdir != w || a.Cwd != tc.cwd || !slices.Equal(a.Paths, tc.paths) || a.MCP.Server != tc.server || a.MCP.Tool != tc.tool {
			t.Errorf("%s: Approval = {Kind %q, Workdir %q, Cwd %q, Paths %q, MCP %+v}, want {%q, %q, %q, %q, {%s %s}}",
				tc.name, a.Kind, a.Workdir, a.Cwd, a.Paths, a.MCP, tc.kind, w, tc.cwd, tc.paths, tc.server, tc.tool)
		}
	}
}
