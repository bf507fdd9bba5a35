package acp

import "testing"

func TestGeminiToolName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"run_shell_command__run_shell_command_1795567170161_0", "run_shell_command"},
		{"mcp_gotools_greet__mcp_gotools_greet_1795567170161_0", "mcp_gotools_greet"},
		{"run_shell_command__mcp_tools_x__1", "run_shell_command"},
		{"mcp_gotools_greet-1795567170161-1", "mcp_gotools_greet"},
		{"read-many-files-1795567170161-2", "read-many-files"},
		{"resolve-prompt-a.txt-abc", ""},
		{"x-1", ""},
		{"plain", ""},
	} {
		if got := GeminiToolName(tc.id); got != tc.want {
			t.Errorf("GeminiToolName(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
