package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// MCP servers (SessionRequest.MCPServers) are given to Claude Code with
// --mcp-config, in the shape the Claude Agent SDKs write:
//
//	{"mcpServers":{
//	  "tools":{"type":"sdk","name":"tools"},
//	  "files":{"type":"stdio","command":"files-mcp","args":["--root","/w"],"env":{"KEY":"VALUE"}},
//	  "web":{"type":"http","url":"https://example.com/mcp","headers":{"Authorization":"Bearer ..."}}
//	}}
//
// A Go server (MCPServer.Server) is an SDK server: Claude Code reaches it
// through the control protocol, with mcp_message control requests whose
// answers carry the server's replies (see protocol.Decode); a Command
// server is started by Claude Code itself, as its child, inside the run's
// containment; a URL server is reached over streamable HTTP with its
// Headers on every request. With only Go servers the configuration is
// passed inline; with a Command or URL server it is written to a file
// (mode 0600, in a directory of its own removed when the run is over), so
// that neither their headers nor their environment, which may hold
// secrets, show on the command line, and no argument of theirs is split
// at a space (--mcp-config takes space-separated values).
//
// Without an Approve callback the tools of these servers are trusted:
// --allowedTools=mcp__<name> lets them run without asking, at every
// permission level. With one, Claude Code asks about each call, and the
// callback decides (Approval.Kind "mcp_tool").

// mcpEntry is one server of --mcp-config.
type mcpEntry struct {
	Type    string            `json:"type"`
	Name    string            `json:"name,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpConfig returns the --mcp-config document of servers, and whether it
// must go to a file (it names a server of another program).
func mcpConfig(servers []invoker.MCPServer) ([]byte, bool, error) {
	cfg := map[string]mcpEntry{}
	file := false
	for _, s := range servers {
		if _, dup := cfg[s.Name]; dup || s.Name == "" {
			return nil, false, fmt.Errorf("%w: MCPServers: the name %q is empty or not unique", invoker.ErrInvalidRequest, s.Name)
		}
		var e mcpEntry
		switch {
		case s.Server != nil:
			e = mcpEntry{Type: "sdk", Name: s.Name}
		case s.Command != "":
			e = mcpEntry{Type: "stdio", Command: s.Command, Args: s.Args}
			if len(s.Env) > 0 {
				e.Env = make(map[string]string, len(s.Env))
				for i, kv := range s.Env {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						// The entry is not quoted: it may hold a secret.
						return nil, false, fmt.Errorf("%w: MCPServers[%q].Env[%d] is not KEY=VALUE", invoker.ErrInvalidRequest, s.Name, i)
					}
					e.Env[k] = v
				}
			}
			file = true
		case s.URL != "":
			e = mcpEntry{Type: "http", URL: s.URL, Headers: s.Headers}
			file = true
		default:
			return nil, false, fmt.Errorf("%w: MCPServers[%q] has no Server, Command or URL", invoker.ErrInvalidRequest, s.Name)
		}
		cfg[s.Name] = e
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	return b, file, err
}

// mcpArgs returns the flags that give Claude Code the servers of req, and
// the function that removes the file they name (nil when there is none).
func mcpArgs(req *invoker.SessionRequest) (args []string, cleanup func(), err error) {
	if len(req.MCPServers) == 0 {
		return nil, nil, nil
	}
	cfg, file, err := mcpConfig(req.MCPServers)
	if err != nil {
		return nil, nil, err
	}
	if file {
		dir, err := os.MkdirTemp("", "clinvoke-claude-mcp-")
		if err != nil {
			return nil, nil, fmt.Errorf("claude: a directory for the MCP configuration: %w", err)
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		path := filepath.Join(dir, "mcp.json")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("claude: writing the MCP configuration: %w", err)
		}
		args = append(args, "--mcp-config="+path)
	} else {
		args = append(args, "--mcp-config="+string(cfg))
	}
	if req.Approve == nil {
		allowed := make([]string, len(req.MCPServers))
		for i, s := range req.MCPServers {
			allowed[i] = "mcp__" + s.Name
		}
		args = append(args, "--allowedTools="+strings.Join(allowed, ","))
	}
	return args, cleanup, nil
}

// withCleanup returns cmd with f added to its Cleanup.
func withCleanup(cmd *driver.Command, f func()) {
	if f == nil {
		return
	}
	if prev := cmd.Cleanup; prev != nil {
		cmd.Cleanup = func() { prev(); f() }
		return
	}
	cmd.Cleanup = f
}

// mcpMessage handles an mcp_message control request: Claude Code's
// JSON-RPC message for the SDK server named server,
//
//	{"type":"control_request","request_id":ID,"request":{"subtype":"mcp_message","server_name":"tools",
//	 "message":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{...}}}}}
//
// answered with the server's reply,
//
//	{"type":"control_response","response":{"subtype":"success","request_id":ID,
//	 "response":{"mcp_response":{"jsonrpc":"2.0","id":2,"result":{...}}}}}
//
// and, for a notification, with {"jsonrpc":"2.0","result":{}}, as the
// Claude Agent SDKs answer (Claude Code expects an answer to every
// control request). Claude Code connects to each SDK server twice at the
// start of the first turn (two initialize handshakes, then tools/list on
// each, at once and under the same ids; mcphost.Bridge serves both on one
// connection), and cancels a call when the turn is interrupted with a
// notifications/cancelled message (measured with 2.1.197). A message for
// one of the request's Go servers goes to the engine (Step.Calls); one for
// any other server is answered at once with a JSON-RPC error.
func (p *protocol) mcpMessage(id, server string, msg json.RawMessage, line []byte) driver.Step {
	step := driver.Step{Events: []invoker.Event{{Kind: invoker.KindRaw, Raw: driver.ValidJSON(bytes.Clone(line))}}}
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(msg, &head)
	if !p.goServers[server] || len(msg) == 0 {
		step.Write = [][]byte{mcpReply(id, head.ID, nil, fmt.Errorf("server %q not found", server), -32601)}
		return step
	}
	step.Calls = []driver.MCPCall{{
		Server:  server,
		Message: bytes.Clone(msg),
		Answer: func(reply []byte, err error) [][]byte {
			return [][]byte{mcpReply(id, head.ID, reply, err, -32603)}
		},
	}}
	return step
}

// mcpReply returns the control_response carrying reply to the message
// with JSON-RPC id msgID, or, when err is not nil, a JSON-RPC error of
// code with err's text (an acknowledgement for a notification).
func mcpReply(id string, msgID json.RawMessage, reply []byte, err error, code int) []byte {
	if err == nil && len(reply) > 0 && !json.Valid(reply) {
		err = errors.New("the server's reply is not JSON")
	}
	var r any = json.RawMessage(reply)
	switch {
	case err != nil && len(msgID) > 0 && string(msgID) != "null":
		r = map[string]any{"jsonrpc": "2.0", "id": msgID, "error": map[string]any{"code": code, "message": err.Error()}}
	case err != nil || len(reply) == 0:
		r = map[string]any{"jsonrpc": "2.0", "result": map[string]any{}}
	}
	return success(id, map[string]any{"mcp_response": r})
}
