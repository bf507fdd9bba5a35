// Package hostconfig is the one source of the configuration that points an
// MCP host (Codex CLI, Gemini CLI, Claude Code) at examples/mcpserver:
// docs/hosts.md shows what [Snippets] renders with [Example], and the e2e
// tests run each real host with what it renders for their temporary
// directories, so the two cannot drift. TestPage fails when the page's copy
// differs; `go generate ./internal/testkit/hostconfig` rewrites it.
//
// Each host gets a configuration file (or part of one) and a headless
// command. What each setting permits, and what the hosts do when
// interrupted, is measured and written in docs/hosts.md beside the snippets.
package hostconfig

//go:generate go test -run TestPage -update

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
)

// ServerName is the name under which every host knows the server; it is
// part of the tool names the host's model sees.
const ServerName = "clinvoke"

// Values are what changes between docs/hosts.md and a test: where the server
// binary is, the one root under which workdirs must lie, and the
// transcript file.
type Values struct {
	// Command is the server's executable: "mcpserver" on PATH, or an
	// absolute path.
	Command string
	// Root is the server's -root. A leading "~/" is expanded by the
	// server itself, since no host runs it through a shell.
	Root string
	// Transcript is the server's -transcript: one JSON line per run,
	// which is where a run cancelled by the host is recorded.
	Transcript string
	// Extra are further arguments of the server, after the others (none
	// in the docs).
	Extra []string
}

// Example holds the values docs/hosts.md shows.
var Example = Values{Command: "mcpserver", Root: "~/src", Transcript: "~/clinvoke.jsonl"}

// A Host is one MCP host and how it is set up to call the server.
type Host struct {
	// Name is the host's executable and the id of its snippets.
	Name string
	// CLIs are the agent CLIs the server serves to this host (its -cli):
	// the other two, so that one agent delegates to another.
	CLIs []string
	// Tool is the CLI whose tool the page's prompt asks for.
	Tool string
	// ConfigFile is where the host reads Config, as the page names it.
	ConfigFile string
	// ConfigLang is the language of Config, for the page's code fence.
	ConfigLang string
	// config is the template of the host's configuration of the server,
	// executed with a [configData].
	config string
	// Command is the headless command that uses the configuration, as
	// argv: the host's executable, then its arguments, where an empty
	// one stands for Prompt (see Argv).
	Command []string
}

// Prompt is the task the page's headless commands give the host.
func (h Host) Prompt() string {
	return fmt.Sprintf("Ask %s, through the %s tools, to review main.go", h.Tool, ServerName)
}

// ToolName is the name under which the host's model sees the server's
// tool (such as codex or codex_parallel): Claude Code calls it
// mcp__clinvoke__codex, Gemini CLI mcp_clinvoke_codex; Codex puts the
// server's tools, under their own names, into one namespace tool,
// mcp__clinvoke, returned as namespace.
func (h Host) ToolName(tool string) (name, namespace string) {
	switch h.Name {
	case "codex":
		return tool, "mcp__" + ServerName
	case "gemini":
		return "mcp_" + ServerName + "_" + tool, ""
	default:
		return "mcp__" + ServerName + "__" + tool, ""
	}
}

// Args returns the server's arguments for this host.
func (h Host) Args(v Values) []string {
	return append([]string{"-root", v.Root, "-cli", strings.Join(h.CLIs, ","), "-transcript", v.Transcript}, v.Extra...)
}

// Hosts are the three hosts, in the order of docs/hosts.md.
var Hosts = []Host{
	{
		Name: "claude",
		CLIs: []string{"codex", "gemini"}, Tool: "codex",
		ConfigFile: "clinvoke.mcp.json", ConfigLang: "json",
		config: `{
  "mcpServers": {
    {{.Name}}: {
      "command": {{.Command}},
      "args": {{.Args}}
    }
  }
}
`,
		// The prompt comes first: --mcp-config and --allowedTools take
		// every argument that follows them.
		Command: []string{"claude", "-p", "", "--mcp-config", "clinvoke.mcp.json", "--allowedTools", "mcp__clinvoke__codex"},
	},
	{
		Name: "codex",
		CLIs: []string{"claude", "gemini"}, Tool: "claude",
		ConfigFile: "~/.codex/config.toml", ConfigLang: "toml",
		config: `[mcp_servers.{{.Table}}]
command = {{.Command}}
args = {{.Args}}
startup_timeout_sec = 30
tool_timeout_sec = 1800
default_tools_approval_mode = "approve"
`,
		Command: []string{"codex", "exec", ""},
	},
	{
		Name: "gemini",
		CLIs: []string{"codex", "claude"}, Tool: "claude",
		ConfigFile: "~/.gemini/settings.json", ConfigLang: "json",
		config: `{
  "mcpServers": {
    {{.Name}}: {
      "command": {{.Command}},
      "args": {{.Args}},
      "timeout": 1800000,
      "trust": true
    }
  }
}
`,
		Command: []string{"gemini", "-p", ""},
	},
}

// Argv returns the host's headless command with its prompt in place of the
// empty argument.
func (h Host) Argv() []string {
	argv := append([]string(nil), h.Command...)
	for i, a := range argv {
		if a == "" {
			argv[i] = h.Prompt()
		}
	}
	return argv
}

// CommandLine returns Argv as a POSIX shell command line.
func (h Host) CommandLine() string {
	var b strings.Builder
	for i, a := range h.Argv() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String() + "\n"
}

// A Snippet is one code block of docs/hosts.md.
type Snippet struct {
	// ID names the block in the page's markers
	// (<!-- hostconfig:ID --> ... <!-- /hostconfig -->).
	ID string
	// Lang is the code fence's language.
	Lang string
	// Text is the block's content, ending in a newline.
	Text string
}

// Snippets returns every host's configuration and headless command,
// rendered with v.
func Snippets(v Values) []Snippet {
	var out []Snippet
	for _, h := range Hosts {
		out = append(out,
			Snippet{ID: h.Name + "-config", Lang: h.ConfigLang, Text: h.Config(v)},
			Snippet{ID: h.Name + "-headless", Lang: "sh", Text: h.CommandLine()},
		)
	}
	return out
}

// configData is what a host's configuration template sees: quoted
// strings (valid in JSON and TOML alike) and a one-line array.
type configData struct {
	Table   string // the server's name as a bare TOML key
	Name    string // the server's name, quoted
	Command string // Values.Command, quoted
	Args    string // the server's arguments, as an array
}

// Config renders the host's configuration of the server with v.
func (h Host) Config(v Values) string {
	var b strings.Builder
	t := template.Must(template.New(h.Name).Parse(h.config))
	err := t.Execute(&b, configData{
		Table:   ServerName,
		Name:    quote(ServerName),
		Command: quote(v.Command),
		Args:    jsonList(h.Args(v)),
	})
	if err != nil {
		panic("hostconfig: " + err.Error()) // the templates are ours
	}
	return b.String()
}

// quote renders s as a JSON string, which is also a TOML basic string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonList renders strings as a one-line JSON (and TOML) array.
func jsonList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// word characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
