package mcpadapter_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// resolved returns dir with its symbolic links evaluated, as the adapter
// hands a workdir to its runs.
func resolved(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// toolServer returns a go-sdk server with no tool, standing for one.
func toolServer(name string) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: name, Version: "v0"}, nil)
}

// servingStub is a stub whose CLI takes every kind of MCP server.
type servingStub struct{ *stub }

func (s servingStub) Capabilities() invoker.Capabilities {
	c := s.stub.Capabilities()
	c.GoTools, c.MCPServers = true, true
	return c
}

// TestMCPServers: every run gets Options.MCPServers in its request, a
// copy of its own, first; a wrapper appends its servers after them.
func TestMCPServers(t *testing.T) {
	tickets := toolServer("tickets")
	servers := []invoker.MCPServer{
		{Name: "tickets", Server: tickets},
		{Name: "docs", URL: "https://docs.example.com/mcp"},
	}
	inv := servingStub{answer("codex")}
	w := &wrapper{Invoker: inv, servers: []invoker.MCPServer{{Name: "mine", Command: "my-server"}}}
	h := newHarness(t, &mcpadapter.Options{MCPServers: servers}, w)
	servers[0].Name = "changed after Register"

	dir := t.TempDir()
	var out mcpadapter.Output
	h.call(context.Background(), t, "codex", args("hi", dir), &out)
	var pout mcpadapter.ParallelOutput
	h.call(context.Background(), t, "codex"+mcpadapter.ParallelSuffix, map[string]any{
		"workdir": dir, "tasks": []map[string]any{{"prompt": "one"}, {"prompt": "two"}, {"prompt": "three"}},
	}, &pout)
	if out.Status != mcpadapter.StatusCompleted || pout.Completed != 3 {
		t.Fatalf("outputs %+v and %+v, want every run completed", out, pout)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if len(inv.reqs) != 4 {
		t.Fatalf("the invoker ran %d times, want 4", len(inv.reqs))
	}
	for _, req := range inv.reqs {
		var names []string
		for _, s := range req.MCPServers {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "tickets,docs,mine" || req.MCPServers[0].Server != tickets ||
			req.MCPServers[1].URL != "https://docs.example.com/mcp" {
			t.Errorf("the run %q got MCPServers %+v, want tickets (the Go server), docs, then the wrapper's mine", req.Prompt, req.MCPServers)
		}
	}
}

// TestMCPServersRegister: Register refuses servers that no run could take,
// naming the server and the fix, before anything is added: the same
// check as a run's request gets.
func TestMCPServersRegister(t *testing.T) {
	goServer := toolServer("tickets")
	plain := func() invoker.Invoker { return answer("codex") } // takes no MCP server
	serving := func() invoker.Invoker { return servingStub{answer("codex")} }
	goOnly := func() invoker.Invoker { return goToolsStub{answer("claude")} }
	for _, tc := range []struct {
		name    string
		servers []invoker.MCPServer
		inv     func() invoker.Invoker
		want    []string
	}{
		{"bad name", []invoker.MCPServer{{Name: "my tools", Server: goServer}}, serving,
			[]string{"Options.MCPServers[0]", `"my tools"`}},
		{"separator in name", []invoker.MCPServer{{Name: "a__b", Server: goServer}}, serving,
			[]string{"Options.MCPServers[0]", "__"}},
		{"name twice", []invoker.MCPServer{{Name: "t", Server: goServer}, {Name: "t", URL: "https://example.com/mcp"}}, serving,
			[]string{"Options.MCPServers[1]", `"t"`, "twice"}},
		{"nothing set", []invoker.MCPServer{{Name: "t"}}, serving,
			[]string{"Options.MCPServers[0]", "exactly one of Server"}},
		{"two set", []invoker.MCPServer{{Name: "t", Server: goServer, Command: "x"}}, serving,
			[]string{"Options.MCPServers[0]", "exactly one of Server"}},
		// What a run's request would be refused for is refused at
		// Register: the check is the engine's.
		{"not a URL", []invoker.MCPServer{{Name: "t", URL: "ftp://example.com/mcp"}}, serving,
			[]string{"Options.MCPServers[0]", "not an http or https URL"}},
		{"bad env entry", []invoker.MCPServer{{Name: "t", Command: "srv", Env: []string{"NOEQUALS"}}}, serving,
			[]string{"Options.MCPServers[0]", "Env[0] has no '='"}},
		{"headers without URL", []invoker.MCPServer{{Name: "t", Command: "srv", Headers: map[string]string{"X": "y"}}}, serving,
			[]string{"Options.MCPServers[0]", "Headers are for a URL server"}},
		{"Go server, CLI without GoTools", []invoker.MCPServer{{Name: "t", Server: goServer}}, plain,
			[]string{"Options.MCPServers[0]", `invoker "codex"`, "Capabilities.GoTools"}},
		{"command server, CLI without MCPServers", []invoker.MCPServer{{Name: "t", Command: "srv"}}, goOnly,
			[]string{"Options.MCPServers[0]", `invoker "claude"`, "Capabilities.MCPServers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
			_, err := mcpadapter.Register(s, &mcpadapter.Options{MCPServers: tc.servers}, tc.inv())
			if err == nil {
				t.Fatal("Register() error = nil, want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Register() error = %v, want it to say %s", err, w)
				}
			}
		})
	}
}

// goToolsStub is a stub whose CLI takes Go servers only.
type goToolsStub struct{ *stub }

func (s goToolsStub) Capabilities() invoker.Capabilities {
	c := s.stub.Capabilities()
	c.GoTools = true
	return c
}
