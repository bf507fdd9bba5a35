package codex

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// A sandboxed run's command servers get NODE_OPTIONS in their env table:
// the inspector option, after the server's own options where its Env sets
// NODE_OPTIONS. No entry sets env_vars, so a caller's env_vars override in
// ExtraArgs reaches Codex's command line as given; a run outside the
// kernel's sandbox and a URL server get no NODE_OPTIONS.
func TestMCPServersNodeOptions(t *testing.T) {
	on := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	servers := []invoker.MCPServer{
		{Name: "echo", Command: "/bin/mcpecho"},
		{Name: "web", URL: "http://127.0.0.1:4000/mcp"},
	}
	withEnv := []invoker.MCPServer{{Name: "echo", Command: "/bin/mcpecho", Env: []string{"NODE_OPTIONS=--max-old-space-size=64", "K=v"}}}
	override := `mcp_servers.echo.env_vars=["FOO", 'BAR'] # kept`
	always := []string{"mcp_servers.echo.env_vars", "mcp_servers.web.env_vars", "mcp_servers.web.env"}
	for _, tc := range []struct {
		name    string
		sb      invoker.Sandbox
		servers []invoker.MCPServer
		extra   []string
		want    map[string]any // the entries of the config map checked
		absent  []string       // entries the config map lacks, besides always
	}{
		{"no sandbox", invoker.Sandbox{}, servers, nil, nil,
			[]string{"mcp_servers.echo.env"}},
		{"sandbox off", invoker.Sandbox{Mode: "off"}, servers, nil, nil,
			[]string{"mcp_servers.echo.env"}},
		{"sandboxed", on, servers, nil,
			map[string]any{"mcp_servers.echo.env": map[string]any{"NODE_OPTIONS": sandbox.NodeInspectorOff}}, nil},
		{"the caller's env_vars untouched", on, servers, []string{"-c", override},
			map[string]any{"mcp_servers.echo.env": map[string]any{"NODE_OPTIONS": sandbox.NodeInspectorOff}}, nil},
		{"Env's NODE_OPTIONS", on, withEnv, nil,
			map[string]any{"mcp_servers.echo.env": map[string]any{"NODE_OPTIONS": "--max-old-space-size=64 " + sandbox.NodeInspectorOff, "K": "v"}}, nil},
		{"Env's NODE_OPTIONS unsandboxed", invoker.Sandbox{}, withEnv, nil,
			map[string]any{"mcp_servers.echo.env": map[string]any{"NODE_OPTIONS": "--max-old-space-size=64", "K": "v"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := invoker.SessionRequest{Workdir: "/w", Sandbox: tc.sb, MCPServers: tc.servers, ExtraArgs: tc.extra}
			cmd, err := (backend{}).SessionCommand(&req)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(tc.extra); n > 0 && !reflect.DeepEqual(cmd.Args[len(cmd.Args)-n:], tc.extra) {
				t.Errorf("Args = %q, want them to end with %q", cmd.Args, tc.extra)
			}
			_, open := openTurn(t, &req)
			var m struct {
				Params struct{ Config map[string]any }
			}
			if err := json.Unmarshal(open, &m); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := m.Params.Config[k]; !reflect.DeepEqual(got, v) {
					t.Errorf("config[%s] = %#v, want %#v", k, got, v)
				}
			}
			for _, k := range append(always, tc.absent...) {
				if got, ok := m.Params.Config[k]; ok {
					t.Errorf("config[%s] = %#v, want none", k, got)
				}
			}
		})
	}
}
