package codex

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// A sandboxed run's command servers get NODE_OPTIONS through env_vars
// (after the names an ExtraArgs override gave them), and an Env that sets
// NODE_OPTIONS gets the inspector option after its own; a run outside the
// kernel's sandbox and a URL server get neither.
func TestMCPServersNodeOptions(t *testing.T) {
	on := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	servers := []invoker.MCPServer{
		{Name: "echo", Command: "/bin/mcpecho"},
		{Name: "web", URL: "http://127.0.0.1:4000/mcp"},
	}
	withEnv := []invoker.MCPServer{{Name: "echo", Command: "/bin/mcpecho", Env: []string{"NODE_OPTIONS=--max-old-space-size=64", "K=v"}}}
	for _, tc := range []struct {
		name    string
		sb      invoker.Sandbox
		servers []invoker.MCPServer
		extra   []string
		want    map[string]any // the entries of the config map checked
		absent  []string       // entries the config map lacks
	}{
		{"no sandbox", invoker.Sandbox{}, servers, nil, nil,
			[]string{"mcp_servers.echo.env_vars", "mcp_servers.web.env_vars"}},
		{"sandbox off", invoker.Sandbox{Mode: "off"}, servers, nil, nil,
			[]string{"mcp_servers.echo.env_vars"}},
		{"sandboxed", on, servers, nil,
			map[string]any{"mcp_servers.echo.env_vars": []any{"NODE_OPTIONS"}},
			[]string{"mcp_servers.web.env_vars", "mcp_servers.echo.env"}},
		{"the caller's names kept", on, servers,
			[]string{"-c", `mcp_servers.echo.env_vars=["FOO", 'BAR',]`, "--config=mcp_servers.web.env_vars=['X']"},
			map[string]any{"mcp_servers.echo.env_vars": []any{"FOO", "BAR", "NODE_OPTIONS"}},
			[]string{"mcp_servers.web.env_vars"}},
		{"the last override counts", on, servers,
			[]string{"--config", `mcp_servers.echo.env_vars=["A"]`, `-cmcp_servers.echo.env_vars=["NODE_OPTIONS","B"]`},
			map[string]any{"mcp_servers.echo.env_vars": []any{"NODE_OPTIONS", "B"}}, nil},
		{"Env's NODE_OPTIONS", on, withEnv, nil,
			map[string]any{
				"mcp_servers.echo.env_vars": []any{"NODE_OPTIONS"},
				"mcp_servers.echo.env":      map[string]any{"NODE_OPTIONS": "--max-old-space-size=64 " + sandbox.NodeInspectorOff, "K": "v"},
			}, nil},
		{"Env's NODE_OPTIONS unsandboxed", invoker.Sandbox{}, withEnv, nil,
			map[string]any{"mcp_servers.echo.env": map[string]any{"NODE_OPTIONS": "--max-old-space-size=64", "K": "v"}},
			[]string{"mcp_servers.echo.env_vars"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := invoker.SessionRequest{Workdir: "/w", Sandbox: tc.sb, MCPServers: tc.servers, ExtraArgs: tc.extra}
			if _, err := (backend{}).SessionCommand(&req); err != nil {
				t.Fatal(err)
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
			for _, k := range tc.absent {
				if got, ok := m.Params.Config[k]; ok {
					t.Errorf("config[%s] = %#v, want none", k, got)
				}
			}
		})
	}
}

// An ExtraArgs override of a server's env_vars that is not an array of
// names is refused before anything starts, where it would be dropped.
func TestMCPServersEnvVarsInvalid(t *testing.T) {
	for _, v := range []string{`"NODE_OPTIONS"`, `[NODE_OPTIONS]`, `["a" "b"]`, `['a`, `["a\q"]`, `[`} {
		req := invoker.SessionRequest{Sandbox: invoker.Sandbox{Mode: "required"},
			MCPServers: []invoker.MCPServer{{Name: "echo", Command: "x"}},
			ExtraArgs:  []string{"-c", "mcp_servers.echo.env_vars=" + v}}
		if _, err := (backend{}).SessionCommand(&req); !errors.Is(err, invoker.ErrInvalidRequest) {
			t.Errorf("env_vars=%s: SessionCommand() error = %v, want ErrInvalidRequest", v, err)
		}
	}
}

// tomlStrings reads one-line arrays of basic and literal strings, and
// nothing else.
func TestTOMLStrings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`[]`, []string{}, true},
		{` [ "A" ] `, []string{"A"}, true},
		{`["A", 'B']`, []string{"A", "B"}, true},
		{`["A",]`, []string{"A"}, true},
		{`["a\"b"]`, []string{`a"b`}, true},
		{`['a\b']`, []string{`a\b`}, true},
		{`"A"`, nil, false},
		{`[A]`, nil, false},
		{`["A" "B"]`, nil, false},
		{`["A",,]`, nil, false},
		{`['A]`, nil, false},
		{``, nil, false},
	} {
		got, ok := tomlStrings(tc.in)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("tomlStrings(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
