package acp

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestApprovalForm checks what an Approval tells a policy of an agent's
// requests for permission: the session's Workdir; a command's Cwd and an
// edit's Paths absolute, clean and resolved (relative ones taken in the
// working directory); and an MCP tool's server and tool by their own
// names, read from the fields the agent makes (Gemini CLI's call id,
// claude-code-acp's _meta), never from the title.
func TestApprovalForm(t *testing.T) {
	ws := testenv.NewWorkspace(t) // w/link → o; alias → w
	w, outside, alias := ws.W, ws.Outside, ws.Alias
	servers := []invoker.MCPServer{{Name: "tools", Command: "srv"}, {Name: "my_tools", Command: "srv"}}
	type mcpName struct{ server, tool string }
	for _, tc := range []struct {
		name     string
		cfg      Config
		toolCall string
		kind     string
		cwd      string
		paths    []string
		mcp      mcpName
	}{
		{name: "relative edit", cfg: geminiConfig,
			toolCall: `{"toolCallId":"write_file__1","title":"Writing to a.txt","locations":[{"path":"sub/a.txt"}],"kind":"edit"}`,
			kind:     invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "sub", "a.txt")}},
		{name: "edit through links", cfg: geminiConfig,
			toolCall: `{"toolCallId":"write_file__1","title":"Writing","content":[{"type":"diff","path":"` + filepath.Join(w, "link", "b.txt") + `","oldText":null,"newText":"x"}],"locations":[{"path":"` + filepath.Join(alias, "a.txt") + `"}],"kind":"edit"}`,
			kind:     invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "a.txt"), filepath.Join(outside, "b.txt")}},
		{name: "command without cwd", cfg: geminiConfig,
			toolCall: `{"toolCallId":"run_shell_command__1","title":"make","kind":"execute"}`,
			kind:     invoker.ApprovalCommand, cwd: w},
		{name: "command with a relative cwd", cfg: Config{Name: "agent"},
			toolCall: `{"toolCallId":"c1","title":"Run","rawInput":{"command":"make","cwd":"sub/.."},"kind":"execute"}`,
			kind:     invoker.ApprovalCommand, cwd: w},
		{name: "gemini's server tool", cfg: geminiConfig,
			toolCall: `{"toolCallId":"mcp_tools_record__mcp_tools_record_1_0","title":"record (tools MCP Server)","kind":"other"}`,
			kind:     invoker.ApprovalMCPTool, mcp: mcpName{"tools", "record"}},
		{name: "gemini's server named with _", cfg: geminiConfig,
			toolCall: `{"toolCallId":"mcp_my_tools_record_it__1","title":"record_it (my_tools MCP Server)","kind":"other"}`,
			kind:     invoker.ApprovalMCPTool, mcp: mcpName{"my_tools", "record_it"}},
		{name: "gemini's other server, read as Gemini reads it", cfg: geminiConfig,
			toolCall: `{"toolCallId":"mcp_other_x_y__1","title":"x_y (other MCP Server)","kind":"other"}`,
			kind:     invoker.ApprovalMCPTool, mcp: mcpName{"other", "x_y"}},
		{name: "claude-code-acp's server tool", cfg: Config{Name: "agent"},
			toolCall: `{"toolCallId":"toolu_1","title":"mcp__tools__x","_meta":{"claudeCode":{"toolName":"mcp__my_tools__record"}}}`,
			kind:     invoker.ApprovalMCPTool, mcp: mcpName{"my_tools", "record"}},
		{name: "a title names nothing", cfg: Config{Name: "agent"},
			toolCall: `{"toolCallId":"c2","title":"record (tools MCP Server)","kind":"other"}`,
			kind:     invoker.ApprovalTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Modes = nil
			x := newProto(t, cfg, invoker.SessionRequest{Workdir: alias, Permission: invoker.Unlimited, Approve: approveAll, MCPServers: servers})
			x.openWith(`{"mcpCapabilities":{"http":true}}`)
			x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
			st := x.feed(permissionLine("7", tc.toolCall, mcpOptions))
			if len(st.Approvals) != 1 {
				t.Fatalf("step = %d approvals, %q written; want the program asked", len(st.Approvals), st.Write)
			}
			a := st.Approvals[0].Request
			if a.Kind != tc.kind || a.Workdir != w || a.Cwd != tc.cwd || !slices.Equal(a.Paths, tc.paths) ||
				a.MCP.Server != tc.mcp.server || a.MCP.Tool != tc.mcp.tool {
				t.Errorf("Approval = {Kind %q, Workdir %q, Cwd %q, Paths %q, MCP %+v}, want {%q, %q, %q, %q, %+v}",
					a.Kind, a.Workdir, a.Cwd, a.Paths, a.MCP, tc.kind, w, tc.cwd, tc.paths, tc.mcp)
			}
		})
	}
}
