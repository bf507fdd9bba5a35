//go:build e2e

package e2e

import (
	"path/filepath"
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
