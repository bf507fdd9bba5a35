package codex

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestApprovalForm checks what an Approval tells a policy of Codex's
// requests: the session's Workdir; a command's Cwd and a change's Paths
// absolute, clean and resolved (relative ones taken in the working
// directory), a grantRoot among them; and an MCP tool's server and tool by
// their own names.
func TestApprovalForm(t *testing.T) {
	ws := testenv.NewWorkspace(t) // w/link → o; alias → w
	w, outside, alias := ws.W, ws.Outside, ws.Alias
	command := func(cwd string) string {
		return `{"method":"item/commandExecution/requestApproval","id":7,"params":{"threadId":"T1","turnId":"U1","itemId":"call_1","command":"make","cwd":"` + cwd + `"}}`
	}
	change := func(changes string) []string {
		return []string{
			`{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"fileChange","id":"call_2","status":"inProgress","changes":` + changes + `}}}`,
			`{"method":"item/fileChange/requestApproval","id":8,"params":{"threadId":"T1","turnId":"U1","itemId":"call_2"}}`,
		}
	}
	type mcpName struct{ server, tool string }
	for _, tc := range []struct {
		name  string
		lines []string
		kind  string
		cwd   string
		paths []string
		mcp   mcpName
	}{
		{name: "command in the workdir's link", lines: []string{command(filepath.Join(alias, "sub", ".."))}, kind: invoker.ApprovalCommand, cwd: w},
		{name: "command, relative cwd", lines: []string{command("sub")}, kind: invoker.ApprovalCommand, cwd: filepath.Join(w, "sub")},
		{name: "command without cwd", lines: []string{`{"method":"item/commandExecution/requestApproval","id":7,"params":{"threadId":"T1","turnId":"U1","itemId":"call_1","command":"make"}}`},
			kind: invoker.ApprovalCommand, cwd: w},
		{name: "relative change", lines: change(`[{"path":"sub/a.txt","kind":{"type":"add"},"diff":"x"}]`),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "sub", "a.txt")}},
		{name: "change through links, moved", lines: change(`[{"path":"` + filepath.Join(alias, "a.txt") + `","kind":{"type":"update","move_path":"link/b.txt"},"diff":"x"}]`),
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "a.txt"), filepath.Join(outside, "b.txt")}},
		{name: "change with a grant of a root through a link", lines: []string{change(`[{"path":"a.txt","kind":{"type":"add"},"diff":"x"}]`)[0],
			`{"method":"item/fileChange/requestApproval","id":8,"params":{"threadId":"T1","turnId":"U1","itemId":"call_2","grantRoot":"` + filepath.Join(alias, "link") + `"}}`},
			kind: invoker.ApprovalFileChange, paths: []string{filepath.Join(w, "a.txt"), outside}},
		{name: "server tool", lines: []string{
			`{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"mcpToolCall","id":"call_3","server":"my_tools","tool":"record_it","status":"inProgress","arguments":{}}}}`,
			`{"method":"mcpServer/elicitation/request","id":9,"params":{"threadId":"T1","turnId":"U1","serverName":"my_tools","mode":"form","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"record_it","tool_params":{}},"message":"m"}}`,
		}, kind: invoker.ApprovalMCPTool, mcp: mcpName{"my_tools", "record_it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openTurn(t, &invoker.SessionRequest{Workdir: alias, Permission: invoker.Unlimited, Approve: allowAll,
				MCPServers: []invoker.MCPServer{{Name: "my_tools", Command: "srv"}}})
			var st = appDecode(t, p, tc.lines[0])
			for _, line := range tc.lines[1:] {
				st = appDecode(t, p, line)
			}
			if len(st.Approvals) != 1 {
				t.Fatalf("Step = %+v, want the program asked", st)
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
