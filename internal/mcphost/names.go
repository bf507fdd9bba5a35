package mcphost

import (
	"context"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// Names reads the name a CLI gives an MCP tool when it asks to call it
// ("mcp__SERVER__TOOL", Gemini CLI's "mcp_SERVER_TOOL"), for the servers
// of one request. A name does not always split one way: a server name
// may hold the separator, and the CLI may have servers of its own
// configuration beside the request's, so that Gemini CLI's
// mcp_db_admin_drop is the tool admin_drop of a server db and as well the
// tool drop of a server db_admin. The tools of a Go server are known
// (listed when Names is made): a name that is not one of them is not
// that server's, whatever server its prefix names. The tools of a
// Command or URL server are not: a name its prefix names is taken for
// its tool.
type Names struct {
	servers   []invoker.MCPServer
	goServers map[string]bool
	goTools   map[string]goTool // by the names the CLIs give them
}

// A goTool is a tool of a Go server: the server's name and its own.
type goTool struct{ server, tool string }

// NewNames returns the Names of servers, listing the tools of the Go
// servers among them (those whose Server is set) over in-memory
// sessions. A Go server whose tools cannot be listed has none: no name is
// taken for its tool.
func NewNames(servers []invoker.MCPServer) *Names {
	n := &Names{servers: servers, goServers: map[string]bool{}, goTools: map[string]goTool{}}
	for _, s := range servers {
		if s.Server == nil {
			continue
		}
		n.goServers[s.Name] = true
		tools, err := listTools(context.Background(), s.Server)
		if err != nil {
			continue
		}
		for _, t := range tools {
			for _, q := range qualifiers {
				n.goTools[q.qualify(s.Name, t.Name)] = goTool{s.Name, t.Name}
			}
		}
	}
	return n
}

// Read reads name, the whole name the CLI gives a tool, whose part after
// the CLI's prefix ("mcp__" or "mcp_") is rest, in a scheme whose
// separator is sep ("__" or "_"). It returns the tool's server and its
// own name, and whether the server is one of the request's (ours): a
// tool of a Go server of the request by its own name; else the longest
// Command or URL server of the request the name starts with ("a_b" over
// "a"); else, when a Go server's name starts it, no server and no tool (a
// tool that server does not have is another server's, which the name
// does not tell); else the server as the CLI reads the name, up to the
// next separator.
func (n *Names) Read(name, rest, sep string) (server, tool string, ours bool) {
	if t, ok := n.goTools[name]; ok {
		return t.server, t.tool, true
	}
	goPrefix := false
	for _, s := range n.servers {
		switch {
		case s.Name == "" || !strings.HasPrefix(rest, s.Name+sep):
		case n.goServers[s.Name]:
			goPrefix = true
		case len(s.Name) > len(server):
			server = s.Name
		}
	}
	switch {
	case server != "":
		return server, rest[len(server)+len(sep):], true
	case goPrefix:
		return "", "", false
	}
	server, tool, _ = strings.Cut(rest, sep)
	return server, tool, false
}
