package acp

import (
	"strings"
)

// A call is the tool of an MCP server of the request (trusted at every
// level) only when fields the agent makes prove it, never from the title,
// which the model writes: Gemini CLI titles a shell call with its command
// line, so a command ending "# (tools MCP Server)" reads like a tool of
// the server tools. What proves it:
//
//   - the call's kind is "other" or none: a call of a kind of the agent's
//     own tools (execute, edit, read, ...) is never a server's, whatever
//     its names say, in the request or in the updates that announced it;
//   - and the names the agent gives the tool it runs, all of them, name a
//     server of the request: Gemini CLI's call id, which it builds as
//     "NAME__ID" from the name of the tool in its registry
//     ("mcp_SERVER_TOOL"; Config.ToolName, or GeminiToolName for an agent
//     whose initialize response says it is gemini-cli), and
//     claude-code-acp's _meta.claudeCode.toolName ("mcp__SERVER__TOOL").
//
// A call with no such name is not a server's tool: the level judges it.
//
// The tools of a Go server of the request are known: a name that is not
// one of them is not that server's, whatever server its prefix names.
// Gemini CLI's mcp_db_admin_drop is the tool admin_drop of a server db,
// and as well the tool drop of a server db_admin of the CLI's settings;
// claude-code-acp's mcp__tools__admin__drop likewise. Such a name is an
// MCP tool of no server of the request, and no server is named for it.
// The tools of a Command or URL server are not known: a name its prefix
// names is its tool.

// callMeta is the _meta of a tool call, as far as it names the tool.
type callMeta struct {
	ClaudeCode struct {
		ToolName string `json:"toolName"`
	} `json:"claudeCode"`
}

func (m callMeta) name() string { return m.ClaudeCode.ToolName }

// ownKind reports whether kind is one of ACP's kinds of an agent's own
// tools: every kind but "other" (and none).
func ownKind(kind string) bool { return kind != "" && kind != "other" }

// geminiAgent is the name Gemini CLI gives itself in initialize's
// agentInfo.
const geminiAgent = "gemini-cli"

// GeminiToolName returns the name of the tool a Gemini CLI tool call runs,
// from the call's id: Gemini builds the id as "NAME__ID"
// ("run_shell_command__run_shell_command_1795567170161_0",
// "mcp_tools_record__..."), or "NAME-MS-N" for a call it numbered itself.
// It returns "" for an id of neither form.
func GeminiToolName(id string) string {
	if name, _, ok := strings.Cut(id, "__"); ok {
		return name
	}
	if rest, n, ok := cutLast(id, "-"); ok && digits(n) {
		if name, ts, ok := cutLast(rest, "-"); ok && digits(ts) {
			return name
		}
	}
	return ""
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// provenNames returns the names the agent gives the tool call id runs:
// from its id (Config.ToolName, or Gemini CLI's form when the agent is
// Gemini CLI) and from its _meta (meta, or what an update said).
func (p *Protocol) provenNames(id, meta string) []string {
	var names []string
	switch {
	case p.cfg.ToolName != nil:
		if n := p.cfg.ToolName(id); n != "" {
			names = append(names, n)
		}
	case p.caps.AgentInfo.Name == geminiAgent:
		if n := GeminiToolName(id); n != "" {
			names = append(names, n)
		}
	}
	if c, ok := p.turn.calls[id]; ok && c.metaName != "" {
		names = append(names, c.metaName)
	}
	if meta != "" {
		names = append(names, meta)
	}
	return names
}

// serverTool reports whether names, the names proven for a call of kind
// kind (the request's, and whether an update gave it an own kind), make
// it an MCP server's tool, and which server of the request it is, if any.
func (p *Protocol) serverTool(kind string, announcedOwn bool, names []string) (mcp bool, server string) {
	if ownKind(kind) || announcedOwn || len(names) == 0 {
		return false, ""
	}
	for i, n := range names {
		s, _, ours, ok := p.mcpTool(n)
		if !ok {
			return false, "" // a name of the agent's own tools
		}
		if !ours {
			s = ""
		}
		if i > 0 && s != server {
			server = "" // the names disagree: an MCP tool, of no server of ours
			continue
		}
		server = s
	}
	return true, server
}

// mcpNames returns the server and the tool that names, the names proven
// for a call of an MCP tool, agree on, or "" and "" when they do not.
func (p *Protocol) mcpNames(names []string) (server, tool string) {
	for i, n := range names {
		s, t, _, ok := p.mcpTool(n)
		if !ok || i > 0 && (s != server || t != tool) {
			return "", ""
		}
		server, tool = s, t
	}
	return server, tool
}

// mcpTool reads an MCP tool's name: claude-code-acp's "mcp__SERVER__TOOL"
// or Gemini CLI's "mcp_SERVER_TOOL". It reports whether name is an MCP
// tool's, and returns its server and tool, and whether the server is one
// of the request's (ours), as mcphost.Names reads them; the separator
// after the server is "__" (Claude Code) or "_" (Gemini CLI's
// parseMcpToolName).
func (p *Protocol) mcpTool(name string) (server, tool string, ours, ok bool) {
	sep := "__"
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		if rest, ok = strings.CutPrefix(name, "mcp_"); !ok {
			return "", "", false, false
		}
		sep = "_"
	}
	server, tool, ours = p.names.Read(name, rest, sep)
	return server, tool, ours, true
}
