package fakeacp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer is one entry of session/new's mcpServers.
type mcpServer struct {
	Type    string      `json:"type"`
	Name    string      `json:"name"`
	Command string      `json:"command"`
	Args    []string    `json:"args"`
	Env     []nameValue `json:"env"`
	URL     string      `json:"url"`
	Headers []nameValue `json:"headers"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// mcpCall asks permission for c, as Gemini CLI asks for an MCP tool, and
// calls the tool when allowed. It returns what it says of the call; false
// when the turn was cancelled first.
func (a *agent) mcpCall(c *MCPCall, intr <-chan struct{}) (string, bool) {
	name := fmt.Sprintf("mcp_%s_%s", c.Server, c.Tool)
	tid := name + "__" + name + "_" + randHex(4)
	title := fmt.Sprintf("%s (%s MCP Server)", c.Tool, c.Server)
	args, _ := json.Marshal(c.Args)
	if c.Args == nil {
		args = []byte("{}")
	}
	say := func(what string) (string, bool) {
		a.chunk("agent_thought_chunk", "mcp "+c.Server+"/"+c.Tool+": "+what)
		return what, true
	}
	a.mu.Lock()
	allowed := a.always[c.Server] || a.always[name]
	a.mu.Unlock()
	if !allowed {
		got, ok := a.askPermission(obj{{"toolCallId", tid}, {"status", "pending"}, {"title", title},
			{"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", string(args)}}}}}},
			{"locations", []obj{}}, {"kind", "other"}}, []obj{
			{{"optionId", "proceed_always_server"}, {"name", "Allow all server tools for this session"}, {"kind", "allow_always"}},
			{{"optionId", "proceed_always_tool"}, {"name", "Allow tool for this session"}, {"kind", "allow_always"}},
			{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
			{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
		}, intr)
		switch {
		case !ok:
			return "", false
		case got == "proceed_always_server" || got == "proceed_always_tool":
			a.mu.Lock()
			if a.always == nil {
				a.always = make(map[string]bool)
			}
			a.always[map[bool]string{true: c.Server, false: name}[got == "proceed_always_server"]] = true
			a.mu.Unlock()
		case got == "proceed_once":
		case got == "cancelled":
			return say("cancelled")
		default:
			return say("rejected")
		}
	}
	a.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"status", "in_progress"}, {"title", title}, {"kind", "other"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-intr:
			cancel()
		case <-ctx.Done():
		}
	}()
	text, err := a.callTool(ctx, c)
	select {
	case <-intr:
		a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "failed"}})
		return "", false
	default:
	}
	if err != nil {
		a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "failed"}})
		return say("error: " + err.Error())
	}
	a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
		{"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", text}}}}}}})
	return say(text)
}

// callTool connects to the server c names and calls its tool.
func (a *agent) callTool(ctx context.Context, c *MCPCall) (string, error) {
	a.mu.Lock()
	var srv *mcpServer
	for i := range a.servers {
		if a.servers[i].Name == c.Server {
			srv = &a.servers[i]
		}
	}
	a.mu.Unlock()
	if srv == nil {
		return "", fmt.Errorf("no MCP server %q in session/new", c.Server)
	}
	var t mcp.Transport
	switch {
	case srv.Command != "":
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Env = os.Environ()
		for _, e := range srv.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		t = &mcp.CommandTransport{Command: cmd}
	case srv.Type == "http":
		h := make(http.Header)
		for _, e := range srv.Headers {
			h.Add(e.Name, e.Value)
		}
		t = &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: headerTransport{h}}}
	default:
		return "", fmt.Errorf("MCP server %q: unsupported entry", c.Server)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fakeacp", Version: "1.0.0"}, nil)
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: c.Args})
	if err != nil {
		return "", err
	}
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", text)
	}
	return text, nil
}

// headerTransport adds headers to every request.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}
