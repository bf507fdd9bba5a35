package acp

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// mcpServers returns the request's MCP servers as session/new and
// session/load take them: a stdio server as {name, command, args, env},
// a URL server as {type "http", name, url, headers}. Headers go over
// standard input, never on a command line. A URL server needs the agent
// to advertise agentCapabilities.mcpCapabilities.http; a Go server must
// have been given a URL by the engine (it keeps its Server, whose tools
// the protocol reads).
//
// Where the kernel holds the run (the engine's Sandbox Mode "required"),
// every stdio server's env sets NODE_OPTIONS with the option that keeps
// node's inspector closed to a SIGUSR1 from a command
// (sandbox.NodeOptions): after the server's own options where its Env sets
// NODE_OPTIONS, else after the options of the agent's environment, which
// the run's own NODE_OPTIONS starts with. An agent may start a server with
// the variables of its env only (claude-code-acp 0.16.2 and codex-acp
// 0.16.0 gave theirs no NODE_OPTIONS), or drop NODE_OPTIONS from what it
// passes on (Gemini CLI 0.61.0 where GITHUB_SHA is set).
func (p *Protocol) mcpServers() ([]any, error) {
	servers := []any{}
	for _, s := range p.req.MCPServers {
		switch {
		case s.Command != "":
			env := []map[string]string{}
			own := false
			for _, kv := range s.Env {
				k, v, _ := strings.Cut(kv, "=")
				if k == sandbox.NodeOptionsVar && p.sandboxed() {
					v, own = sandbox.NodeOptions(v), true
				}
				env = append(env, map[string]string{"name": k, "value": v})
			}
			if p.sandboxed() && !own {
				env = append(env, map[string]string{"name": sandbox.NodeOptionsVar, "value": sandbox.NodeOptionsIn(p.req.Env)})
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			servers = append(servers, map[string]any{"name": s.Name, "command": s.Command, "args": args, "env": env})
		case s.URL != "":
			if !p.caps.AgentCapabilities.MCPCapabilities.HTTP {
				return nil, fmt.Errorf("%w: MCP server %q is reached over HTTP, and %s does not advertise mcpCapabilities.http in its initialize response: give it as a command (stdio) instead", invoker.ErrUnsupported, s.Name, p.cfg.name())
			}
			headers := []map[string]string{}
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, map[string]string{"name": k, "value": s.Headers[k]})
			}
			servers = append(servers, map[string]any{"type": "http", "name": s.Name, "url": s.URL, "headers": headers})
		case s.Server != nil:
			return nil, fmt.Errorf("%w: MCP server %q is a Go server, which the engine serves over HTTP; this client takes its URL only", invoker.ErrUnsupported, s.Name)
		default:
			return nil, fmt.Errorf("%w: MCP server %q has no command and no URL", invoker.ErrInvalidRequest, s.Name)
		}
	}
	return servers, nil
}

// sandboxed reports whether the kernel holds the session's run: the
// engine gives every backend the sandbox its check decided, Mode
// "required" where the kernel holds the run and "off" where it does not
// (driver.Backend.Command).
func (p *Protocol) sandboxed() bool { return p.req.Sandbox.Mode == "required" }
