//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Codex's two-way control runs on its app-server (codex/approval.go,
// codex/mcp.go): approvals are its requestApproval and MCP-tool
// elicitation requests, the Go tools are served over loopback HTTP and
// configured as an mcp_servers entry, and the model calls an MCP tool as
// the function TOOL of the namespace tool mcp__SERVER. A command's
// Approval shows the command line as Codex runs it, with its cwd; Codex
// has no message for a denial, so the model reads Codex's own words.
func init() {
	twoWay["codex"] = &twoWayCLI{
		mcpTool: func(server, tool string) string { return "mcp__" + server + "__" + tool },
		mcpCall: func(server, tool string, input map[string]any) fakemodel.Turn {
			return fakemodel.Turn{Call: &fakemodel.Call{Namespace: "mcp__" + server, Name: tool, Input: input}}
		},
		ask:         invoker.WorkspaceWrite,
		shellTool:   "command_execution",
		commandLine: func(command string) string { return "/bin/bash -lc '" + command + "'" },
		denial:      func(string) string { return "rejected by user" },
		write: func(path, content string) fakemodel.Turn {
			// apply_patch is a freeform tool: its input is the patch.
			return fakemodel.Turn{Call: &fakemodel.Call{Name: "apply_patch",
				Freeform: "*** Begin Patch\n*** Add File: " + path + "\n+" + content + "\n*** End Patch\n"}}
		},
		approval: codexApproval,
	}
}

// codexApproval holds Codex's own approval scenario: the sandbox of the
// permission level is a ceiling that an allow does not lift.
func codexApproval(t *testing.T, r *rig) {
	t.Run("ceiling", func(t *testing.T) {
		// An allowed command still runs in the sandbox of the level:
		// read-only, so the file is not created, and Codex does not rerun
		// it outside the sandbox.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "ceiling.txt")
		got, res := approvalTurn(t, r, invoker.ReadOnly, invoker.Decision{Allow: true}, fakemodel.Shell("touch "+file))
		twoWay["codex"].askedOnce(t, r, got, "touch "+file)
		absent(t, file, "the command ran under ReadOnly")
		if !strings.Contains(res.Text, "Read-only file system") {
			t.Errorf("answer %q, want the sandbox's refusal", res.Text)
		}
	})
}
