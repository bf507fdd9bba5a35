package codex

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// The MCP servers of a request (SessionRequest.MCPServers) become entries
// of Codex's own configuration, given in the config map of the thread's
// opening (thread/start, thread/resume, thread/fork), which app-server
// reads from its standard input:
//
//	"config": {"mcp_servers.NAME.command": "CMD", "mcp_servers.NAME.args": [...], "mcp_servers.NAME.env": {"K": "V"}}
//	"config": {"mcp_servers.NAME.url": "URL", "mcp_servers.NAME.http_headers": {"Header": "value"}}
//
// Nothing of an entry is on app-server's command line, where ps shows it,
// nor in its environment: the agent's commands run as Codex's uid, inside
// the same sandbox, and can read /proc/PID/environ of Codex and of its
// ancestors, so a header value there (the bearer token of the engine's Go
// tools, served on 127.0.0.1, which the sandbox's network rules let
// through) would let a command call the tools itself. Codex keeps the
// entries of the opening for the thread and neither writes them to the
// thread's rollout nor to CODEX_HOME (measured with 0.169.0), so every
// opening, a resume's and a fork's too, gives them again. A command
// server's Env is its env table: Codex gives it to the server only, on
// top of the few variables (HOME, PATH, ...) it passes every server, and
// the agent's commands never see it.
//
// Under the kernel's sandbox every node process of the run gets the run's
// NODE_OPTIONS (sandbox.NodeOptions), which keeps node's inspector closed
// to a SIGUSR1 from a command. Codex (0.169.0) starts a command server
// with a fixed list of variables (HOME, PATH, ...), those its env_vars
// names and its env table, so a sandboxed run's entry sets NODE_OPTIONS in
// its env table: the option, after the caller's options where Env sets
// NODE_OPTIONS. The entry sets no env_vars, so an env_vars the caller
// gives (a --config override of ExtraArgs) reaches Codex as it was given.
//
// Without an Approve callback the servers of the request are trusted:
// default_tools_approval_mode = "approve" lets their tools run without the
// question Codex otherwise asks (and fails under the approval policy
// never). With Approve, Codex asks, and the question goes to the callback.

// bareKey is what Codex takes as a bare TOML key in a configuration
// override's dotted path; a server's name must be one, and is shown to the
// model in its tools' namespace (mcp__NAME).
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mcpConfig returns the entries of the thread's config map that configure
// servers (nil when there are none), and an error wrapping
// ErrInvalidRequest for an entry Codex cannot take. Entries with a Go
// Server are the engine's to serve: it hands the backend a URL entry in
// their place, so one that is still here is refused. A sandboxed run's
// command servers get NODE_OPTIONS in their env table (above).
func mcpConfig(servers []invoker.MCPServer, trusted, sandboxed bool) (map[string]any, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	config := make(map[string]any)
	seen := make(map[string]bool)
	for i, s := range servers {
		if !bareKey.MatchString(s.Name) {
			return nil, fmt.Errorf("%w: MCPServers[%d]: name %q: use letters, digits, '-' and '_'", invoker.ErrInvalidRequest, i, s.Name)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: MCPServers: the name %q is used twice", invoker.ErrInvalidRequest, s.Name)
		}
		seen[s.Name] = true
		key := "mcp_servers." + s.Name + "."
		switch {
		case s.Server != nil:
			return nil, fmt.Errorf("%w: MCPServers[%d] (%s): a Go server reached the codex backend unserved", invoker.ErrInvalidRequest, i, s.Name)
		case s.Command != "" && s.URL == "":
			config[key+"command"] = s.Command
			if len(s.Args) > 0 {
				config[key+"args"] = s.Args
			}
			env := make(map[string]string, len(s.Env)+1)
			for j, kv := range s.Env {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					// The entry is not quoted: it may hold a secret.
					return nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env[%d] is not KEY=VALUE", invoker.ErrInvalidRequest, i, s.Name, j)
				}
				if _, dup := env[name]; dup {
					return nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env names %s twice; give each variable once", invoker.ErrInvalidRequest, i, s.Name, name)
				}
				env[name] = value
			}
			if sandboxed {
				env[sandbox.NodeOptionsVar] = sandbox.NodeOptions(env[sandbox.NodeOptionsVar])
			}
			if len(env) > 0 {
				config[key+"env"] = env
			}
		case s.URL != "" && s.Command == "":
			config[key+"url"] = s.URL
			if len(s.Headers) > 0 {
				config[key+"http_headers"] = s.Headers
			}
		default:
			return nil, fmt.Errorf("%w: MCPServers[%d] (%s): set exactly one of Server, Command and URL", invoker.ErrInvalidRequest, i, s.Name)
		}
		if trusted {
			config[key+"default_tools_approval_mode"] = "approve"
		}
	}
	return config, nil
}
