package codex

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// The MCP servers of a request (SessionRequest.MCPServers) become entries
// of Codex's own configuration, given to app-server as overrides:
//
//	-c mcp_servers.NAME.command="CMD" -c mcp_servers.NAME.args=[...] -c mcp_servers.NAME.env_vars=[...]
//	-c mcp_servers.NAME.url="URL" -c mcp_servers.NAME.env_http_headers={"Header"="VAR"}
//
// A command server's Env and a URL server's header values never appear on
// the command line, where ps shows them: they go into app-server's
// environment, and the entry names the variables (env_vars, which Codex
// copies into the server's environment; env_http_headers, whose values
// Codex sends as the headers). The variables holding header values are
// named CLINVOKE_MCP_<i>_H<j>_TOKEN, which Codex's default
// shell_environment_policy keeps out of the environment of the agent's
// own commands (it drops names containing KEY, SECRET or TOKEN). A command
// server's Env keeps the names the server expects, which the agent's
// commands would inherit from app-server: each name that neither the
// host's environment nor Request.Env holds is set empty for them
// (-c shell_environment_policy.set.NAME="", which adds to the user's own
// policy rather than replacing it; measured with 0.169.0). A name the host
// already has is left alone: the agent's commands see the server's value
// there, as Codex itself does. A name Request.Env gives another value is
// refused, since Request.Env's value would reach the server.
//
// Without an Approve callback the servers of the request are trusted:
// default_tools_approval_mode = "approve" lets their tools run without the
// question Codex otherwise asks (and fails under the approval policy
// never). With Approve, Codex asks, and the question goes to the callback.

// bareKey is what Codex takes as a bare TOML key in a -c override's dotted
// path; a server's name must be one, and is shown to the model in its
// tools' namespace (mcp__NAME).
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mcpConfig returns the -c overrides and the environment that configure
// servers, and an error wrapping ErrInvalidRequest for an entry Codex
// cannot take. Entries with a Go Server are the engine's to serve: it
// hands the backend a URL entry in their place, so one that is still here
// is refused. reqEnv is Request.Env, and inHost reports whether the host's
// environment holds a variable.
func mcpConfig(servers []invoker.MCPServer, trusted bool, reqEnv []string, inHost func(string) bool) (args, env []string, err error) {
	seen := make(map[string]bool)
	// A Command server's Env reaches it through app-server's own
	// environment, shared by every server: two servers may not give one
	// variable different values.
	envOf := make(map[string]string) // variable → the server that set it
	envVal := make(map[string]string)
	reqVal := make(map[string]string)
	for _, kv := range reqEnv {
		name, value, _ := strings.Cut(kv, "=")
		reqVal[name] = value
	}
	hidden := make(map[string]bool) // variables set empty for the agent's commands
	for i, s := range servers {
		if !bareKey.MatchString(s.Name) {
			return nil, nil, fmt.Errorf("%w: MCPServers[%d]: name %q: use letters, digits, '-' and '_'", invoker.ErrInvalidRequest, i, s.Name)
		}
		if seen[s.Name] {
			return nil, nil, fmt.Errorf("%w: MCPServers: the name %q is used twice", invoker.ErrInvalidRequest, s.Name)
		}
		seen[s.Name] = true
		key := "--config=mcp_servers." + s.Name + "."
		switch {
		case s.Server != nil:
			return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): a Go server reached the codex backend unserved", invoker.ErrInvalidRequest, i, s.Name)
		case s.Command != "" && s.URL == "":
			args = append(args, key+"command="+tomlString(s.Command))
			if len(s.Args) > 0 {
				args = append(args, key+"args="+tomlArray(s.Args))
			}
			var names []string
			for j, kv := range s.Env {
				name, _, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					// The entry is not quoted: it may hold a secret.
					return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env[%d] is not KEY=VALUE", invoker.ErrInvalidRequest, i, s.Name, j)
				}
				_, value, _ := strings.Cut(kv, "=")
				if other, ok := envOf[name]; ok && envVal[name] != value {
					return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env sets %s, which server %q sets to another value: Codex passes both through its own environment, so give the variable one value", invoker.ErrInvalidRequest, i, s.Name, name, other)
				}
				if v, ok := reqVal[name]; ok && v != value {
					return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env sets %s, which Request.Env sets to another value: Codex passes both through its own environment, where Request.Env's wins, so give the variable one value", invoker.ErrInvalidRequest, i, s.Name, name)
				}
				envOf[name], envVal[name] = s.Name, value
				names = append(names, name)
				env = append(env, kv)
			}
			if len(names) > 0 {
				args = append(args, key+"env_vars="+tomlArray(names))
			}
			for _, name := range names {
				if _, ok := reqVal[name]; ok || hidden[name] || inHost(name) {
					continue
				}
				if !bareKey.MatchString(name) {
					return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): Env name %q: Codex can keep from its agent's commands only a name of letters, digits, '-' and '_'", invoker.ErrInvalidRequest, i, s.Name, name)
				}
				hidden[name] = true
				args = append(args, `--config=shell_environment_policy.set.`+name+`=""`)
			}
		case s.URL != "" && s.Command == "":
			args = append(args, key+"url="+tomlString(s.URL))
			if len(s.Headers) > 0 {
				headers := make([]string, 0, len(s.Headers))
				for h := range s.Headers {
					headers = append(headers, h)
				}
				sort.Strings(headers)
				var b strings.Builder
				b.WriteByte('{')
				for j, h := range headers {
					v := "CLINVOKE_MCP_" + strconv.Itoa(i) + "_H" + strconv.Itoa(j) + "_TOKEN"
					env = append(env, v+"="+s.Headers[h])
					if j > 0 {
						b.WriteByte(',')
					}
					b.WriteString(tomlString(h) + "=" + tomlString(v))
				}
				b.WriteByte('}')
				args = append(args, key+"env_http_headers="+b.String())
			}
		default:
			return nil, nil, fmt.Errorf("%w: MCPServers[%d] (%s): set exactly one of Server, Command and URL", invoker.ErrInvalidRequest, i, s.Name)
		}
		if trusted {
			args = append(args, key+`default_tools_approval_mode="approve"`)
		}
	}
	return args, env, nil
}

// tomlArray writes ss as a TOML array of strings.
func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}
