package acp

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// mcpServers returns the request's MCP servers as session/new and
// session/load take them: a stdio server as {name, command, args, env},
// a URL server as {type "http", name, url, headers}. Headers go over
// standard input, never on a command line. A URL server needs the agent
// to advertise agentCapabilities.mcpCapabilities.http; a Go server must
// have been given a URL by the engine (it keeps its Server, whose tools
// the protocol reads).
func (p *Protocol) mcpServers() ([]any, error) {
	servers := []any{}
	for _, s := range p.req.MCPServers {
		switch {
		case s.Command != "":
			env := []map[string]string{}
			for _, kv := range s.Env {
				k, v, _ := strings.Cut(kv, "=")
				env = append(env, map[string]string{"name": k, "value": v})
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
