package claude

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestApprovalForm checks what an Approval tells a policy of Claude Code's
// requests: the session's Workdir; Paths and Cwd absolute, clean and
// resolved, relative paths taken in the working directory; and an MCP
// tool's server and tool by their own names, the request's server found
// whole even when its name holds "__".
func TestApprovalForm(t *testing.T) {
	ws := testenv.NewWorkspace(t) // w/link → o; alias → w
	base, w, outside, alias := ws.Base, ws.W, ws.Outside, ws.Alias
	home := filepath.Join(base, "home")
	req := func(perm invoker.Permission) *invoker.SessionRequest {
		return &invoker.SessionRequest{Workdir: alias, Permission: perm, Approve: approveAll, Env: []string{"HOME=" + home},
			MCPServers: []invoker.MCPServer{{Name: "tools", Command: "srv"}, {Name: "a__b", Command: "srv"}}}
	}
	request := func(tool, input, blocked string) []byte {
		return []byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"` + tool +
			`","input":` + input + `,"permission_suggestions":[],"blocked_path":"` + blocked + `","tool_use_id":"toolu_1"}}`)
	}
	type mcpName struct{ server, tool string }
	for _, tc := range []struct {
		name       string
		perm       invoker.Permission
		line       []byte
		kind       string
		cwd        string
		paths      []string
		mcp        mcpName
		toolNameIs string
	}{
		{name: "relative edit", perm: invoker.WorkspaceWrite, line: request("Write", `{"file_path":"sub/./a.txt","content":"x"}`, ""),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "sub", "a.txt")}},
		{name: "edit through the workdir's link", perm: invoker.WorkspaceWrite, line: request("Edit", `{"file_path":"`+filepath.Join(alias, "a.txt")+`"}`, filepath.Join(alias, "a.txt")),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "a.txt")}},
		{name: "edit through a link that leaves", perm: invoker.Unlimited, line: request("Write", `{"file_path":"link/x","content":"x"}`, ""),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(outside, "x")}},
		{name: "dot-dot after a link, both readings", perm: invoker.Unlimited, line: request("Write", `{"file_path":"link/../x","content":"x"}`, ""),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(base, "x"), filepath.Join(w, "x")}},
		{name: "tilde, both readings", perm: invoker.Unlimited, line: request("Write", `{"file_path":"~/x","content":"x"}`, ""),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "~", "x"), filepath.Join(home, "x")}},
		{name: "notebook and blocked path", perm: invoker.Unlimited, line: request("NotebookEdit", `{"notebook_path":"n.ipynb"}`, filepath.Join(alias, "n.ipynb")),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "n.ipynb")}},
		{name: "command", perm: invoker.Unlimited, line: request("Bash", `{"command":"make"}`, ""),
			kind: invoker.ApprovalCommand, cwd: w},
		{name: "server tool", perm: invoker.ReadOnly, line: request("mcp__tools__record", `{"text":"x"}`, ""),
			kind: invoker.ApprovalMCPTool, mcp: mcpName{"tools", "record"}},
		{name: "server named with __", perm: invoker.ReadOnly, line: request("mcp__a__b__c__d", `{}`, ""),
			kind: invoker.ApprovalMCPTool, mcp: mcpName{"a__b", "c__d"}},
		{name: "another server's tool", perm: invoker.Unlimited, line: request("mcp__other__x__y", `{}`, ""),
			kind: invoker.ApprovalMCPTool, mcp: mcpName{"other", "x__y"}},
		{name: "own tool", perm: invoker.Unlimited, line: request("Task", `{}`, ""), kind: invoker.ApprovalTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(req(tc.perm))
			st, err := p.Decode(tc.line)
			if err != nil || len(st.Approvals) != 1 {
				t.Fatalf("Decode() = %+v, %v; want the program asked", st, err)
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
