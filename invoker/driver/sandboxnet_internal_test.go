package driver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxNetMustReach: what a run must reach is allowed with no rule:
// the model's configured base URL (a variable, or Codex's config.toml),
// else the CLI's default hosts; the MCP servers given by URL; those on the
// host's loopback forwarded rather than allowed through the proxy.
func TestSandboxNetMustReach(t *testing.T) {
	codexHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte("[model_providers.fake]\nbase_url = \"http://127.0.0.1:4100/v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mcp := []invoker.MCPServer{{Name: "a", URL: "https://mcp.example.com/mcp"}, {Name: "b", URL: "http://localhost:4200/mcp"}, {Name: "c", Command: "x"}}
	extra := []egress.Rule{{Host: "registry.npmjs.org", Port: 443}}
	for _, tc := range []struct {
		cli      string
		env      []string
		allow    []egress.Rule
		loopback []string
	}{
		{"claude", []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000"}, nil, []string{"127.0.0.1:4000"}},
		{"claude", []string{"HOME=" + t.TempDir()}, []egress.Rule{{Host: "api.anthropic.com", Port: 443}, {Host: "console.anthropic.com", Port: 443}}, nil},
		{"gemini", []string{"GOOGLE_GEMINI_BASE_URL=https://llm.internal.example"}, []egress.Rule{{Host: "llm.internal.example", Port: 443}}, nil},
		{"codex", []string{"CODEX_HOME=" + codexHome}, nil, []string{"127.0.0.1:4100"}},
		{"unknown", nil, nil, nil},
	} {
		cfg := netConfig(extra, tc.cli, tc.env, mcp)
		wantAllow := slices.Concat(extra, tc.allow, []egress.Rule{{Host: "mcp.example.com", Port: 443}})
		wantLoop := append(tc.loopback, "localhost:4200")
		if !slices.Equal(cfg.Allow, wantAllow) || !slices.Equal(cfg.Loopback, wantLoop) {
			t.Errorf("%s %v: Allow %v, Loopback %v; want %v, %v", tc.cli, tc.env, cfg.Allow, cfg.Loopback, wantAllow, wantLoop)
		}
	}
}
