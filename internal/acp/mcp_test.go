package acp

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestMCPServersNodeOptions: where the kernel holds the run (the engine's
// Sandbox Mode "required", which it gives when only Options.Sandbox asks
// for the sandbox too), each stdio server's env of session/new and
// session/load sets NODE_OPTIONS with the inspector option: after the
// server's own NODE_OPTIONS where its Env sets one (kept first), else
// after the agent's environment's. A run the kernel does not hold ("off")
// and a URL server get none.
func TestMCPServersNodeOptions(t *testing.T) {
	off := sandbox.NodeInspectorOff
	held := invoker.Sandbox{Mode: "required"}
	plain := invoker.MCPServer{Name: "srv", Command: "/bin/srv", Env: []string{"A=1"}}
	own := invoker.MCPServer{Name: "srv", Command: "/bin/srv", Env: []string{"NODE_OPTIONS=--max-old-space-size=64", "A=1"}}
	type env = []map[string]string
	for _, tc := range []struct {
		name    string
		sb      invoker.Sandbox
		runEnv  []string // the agent's environment
		server  invoker.MCPServer
		resume  bool
		wantEnv env
	}{
		{"held", held, nil, plain, false,
			env{{"name": "A", "value": "1"}, {"name": "NODE_OPTIONS", "value": off}}},
		{"held, with network rules", invoker.Sandbox{Mode: "required", Network: []string{"none"}}, nil, plain, false,
			env{{"name": "A", "value": "1"}, {"name": "NODE_OPTIONS", "value": off}}},
		{"held, session/load", held, nil, plain, true,
			env{{"name": "A", "value": "1"}, {"name": "NODE_OPTIONS", "value": off}}},
		{"the server's own kept first", held, []string{"NODE_OPTIONS=--no-warnings"}, own, false,
			env{{"name": "NODE_OPTIONS", "value": "--max-old-space-size=64 " + off}, {"name": "A", "value": "1"}}},
		{"the agent's environment's kept first", held, []string{"NODE_OPTIONS=--no-warnings"}, plain, false,
			env{{"name": "A", "value": "1"}, {"name": "NODE_OPTIONS", "value": "--no-warnings " + off}}},
		{"given already", held, nil, invoker.MCPServer{Name: "srv", Command: "/bin/srv", Env: []string{"NODE_OPTIONS=" + off}}, false,
			env{{"name": "NODE_OPTIONS", "value": off}}},
		{"not held", invoker.Sandbox{Mode: "off"}, []string{"NODE_OPTIONS=--no-warnings"}, plain, false,
			env{{"name": "A", "value": "1"}}},
		{"not held, the server's own", invoker.Sandbox{Mode: "off"}, nil, own, false,
			env{{"name": "NODE_OPTIONS", "value": "--max-old-space-size=64"}, {"name": "A", "value": "1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := invoker.SessionRequest{Sandbox: tc.sb, Env: tc.runEnv,
				MCPServers: []invoker.MCPServer{tc.server, {Name: "web", URL: "http://127.0.0.1:9/mcp"}}}
			method := "session/new"
			if tc.resume {
				req.SessionID, method = "S0", "session/load"
			}
			x := newProto(t, Config{}, req)
			x.p.Open()
			st := x.feed(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true}}}}`)
			var m struct {
				Method string
				Params struct {
					MCPServers []struct {
						Type string
						Env  env
					}
				}
			}
			if len(st.Write) != 1 || json.Unmarshal(st.Write[0], &m) != nil || m.Method != method || len(m.Params.MCPServers) != 2 {
				t.Fatalf("wrote %q, want %s with two servers", st.Write, method)
			}
			if got := m.Params.MCPServers[0].Env; !reflect.DeepEqual(got, tc.wantEnv) {
				t.Errorf("the stdio server's env = %v, want %v", got, tc.wantEnv)
			}
			if web := m.Params.MCPServers[1]; web.Type != "http" || web.Env != nil {
				t.Errorf("the URL server = %+v, want type http and no env", web)
			}
		})
	}
}
