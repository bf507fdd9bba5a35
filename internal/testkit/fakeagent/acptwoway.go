package fakeagent

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
)

// acpTwoWay is the state of an ACP agent's two-way control: the mode,
// the MCP servers of session/new, and what the session allowed.
type acpTwoWay struct {
	mu      sync.Mutex
	mode    string
	servers []mcpServer
	allowed map[string]bool // "shell:<command>", "server:<name>", "tool:<server>/<tool>"
	clients mcpClients
	replies pendingReplies
	next    int
}

// acpMCPServer is an entry of session/new's mcpServers: stdio (no type),
// http or sse.
type acpMCPServer struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Headers []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
	Env []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

// newACPTwoWay starts in the mode Gemini CLI's flags ask for.
func newACPTwoWay(args []string) *acpTwoWay {
	g := &acpTwoWay{mode: "default", allowed: map[string]bool{}}
	if m, ok := flagValue(args, "--approval-mode"); ok {
		g.mode = m
	}
	for _, a := range args {
		if a == "--yolo" || a == "-y" {
			g.mode = "yolo"
		}
	}
	return g
}

// setServers takes the mcpServers of session/new.
func (g *acpTwoWay) setServers(servers []acpMCPServer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.servers = nil
	for _, s := range servers {
		m := mcpServer{Name: s.Name, Command: s.Command, Args: s.Args, Headers: map[string]string{}}
		if s.Type == "http" {
			m.URL = s.URL
		}
		for _, h := range s.Headers {
			m.Headers[h.Name] = h.Value
		}
		for _, e := range s.Env {
			m.Env = append(m.Env, e.Name+"="+e.Value)
		}
		g.servers = append(g.servers, m)
	}
}

// ask sends session/request_permission with options and returns the
// option the client selected ("" for a cancelled outcome), or ctx's error.
func (g *acpAgent) ask(ctx context.Context, toolCall obj, options []obj) (string, error) {
	t := g.two
	t.mu.Lock()
	id := t.next
	t.next++
	t.mu.Unlock()
	key := strconv.Itoa(id)
	ch := t.replies.add(key)
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"method", "session/request_permission"}, {"params", obj{
		{"sessionId", g.a.sid}, {"options", options}, {"toolCall", toolCall}}}})
	res, err := t.replies.await(ctx, key, ch)
	if err != nil {
		return "", err
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	json.Unmarshal(res, &r)
	if r.Outcome.Outcome != "selected" {
		return "", nil
	}
	return r.Outcome.OptionID, nil
}

// asks reports whether the agent asks before a call that the session has
// not allowed under any of keys.
func (t *acpTwoWay) asks(keys ...string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mode == "yolo" {
		return false
	}
	for _, k := range keys {
		if t.allowed[k] {
			return false
		}
	}
	return true
}

func (t *acpTwoWay) allow(key string) {
	t.mu.Lock()
	t.allowed[key] = true
	t.mu.Unlock()
}

// acpActions runs the turn's Ask and CallTool and returns their outcome
// lines; an error means ctx (a cancel) ended the turn.
func (g *acpAgent) acpActions(ctx context.Context) (outcomes, error) {
	var out outcomes
	if g.a.s.Ask != "" {
		line, err := g.acpAsk(ctx, g.a.s.Ask)
		if err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	if g.a.s.CallTool != "" {
		line, err := g.acpCallTool(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	return out, nil
}

// textContent is a tool call's content holding text.
func textContent(text string) []obj {
	return []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", text}}}}}
}

// acpAsk asks permission to run command (outside yolo mode, unless the
// session allowed it) and runs it if allowed.
func (g *acpAgent) acpAsk(ctx context.Context, command string) (string, error) {
	tid := "run_shell_command-" + randHex(6)
	root, _, _ := strings.Cut(command, " ")
	key := "shell:" + root
	if g.two.asks(key) {
		opt, err := g.ask(ctx, obj{{"toolCallId", tid}, {"status", "pending"}, {"title", command},
			{"content", []obj{}}, {"locations", []obj{}}, {"kind", "execute"}}, []obj{
			{{"optionId", "proceed_always"}, {"name", "Always Allow " + root}, {"kind", "allow_always"}},
			{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
			{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
		})
		if err != nil {
			return "", err
		}
		switch opt {
		case "proceed_always":
			g.two.allow(key)
		case "proceed_once":
		default:
			g.toolUpdate(tid, "failed", "Tool call rejected by the user.")
			return denied(""), nil
		}
		g.toolUpdate(tid, "in_progress")
	} else {
		g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"status", "in_progress"},
			{"title", command}, {"content", []obj{}}, {"locations", []obj{}}, {"kind", "execute"}})
	}
	output, code := runShell(ctx, command)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	status := "completed"
	if code != 0 {
		status = "failed"
	}
	g.toolUpdate(tid, status, output)
	return OutcomeApproved, nil
}

// toolUpdate reports the tool call tid's new status, with text, if
// given, as its content.
func (g *acpAgent) toolUpdate(tid, status string, text ...string) {
	u := obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", status}}
	if len(text) > 0 {
		u = append(u, kv{"content", textContent(text[0])})
	}
	g.update(u)
}

// acpCallTool calls CallTool's tool as an MCP client of the server of
// session/new, asking first (outside yolo mode, unless the session
// allowed the tool or its server).
func (g *acpAgent) acpCallTool(ctx context.Context) (string, error) {
	server, tool := toolTarget(g.a.s.CallTool)
	args := g.a.s.toolArgs()
	tid := "mcp_" + server + "_" + tool + "-" + randHex(6)
	title := tool + " (" + server + " MCP Server)"
	g.two.mu.Lock()
	srv, ok := findServer(g.two.servers, server)
	g.two.mu.Unlock()
	fail := func(msg string) (string, error) {
		g.toolUpdate(tid, "failed", msg)
		return OutcomeToolFailed + ": " + msg, nil
	}
	if !ok {
		return fail("Tool \"mcp_" + server + "_" + tool + "\" not found in registry.")
	}
	if g.two.asks("server:"+server, "tool:"+server+"/"+tool) {
		opt, err := g.ask(ctx, obj{{"toolCallId", tid}, {"status", "pending"}, {"title", title},
			{"content", []obj{}}, {"locations", []obj{}}, {"kind", "other"}}, []obj{
			{{"optionId", "proceed_always_server"}, {"name", "Always Allow " + server}, {"kind", "allow_always"}},
			{{"optionId", "proceed_always_tool"}, {"name", "Always Allow " + tool}, {"kind", "allow_always"}},
			{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
			{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
		})
		if err != nil {
			return "", err
		}
		switch opt {
		case "proceed_always_server":
			g.two.allow("server:" + server)
		case "proceed_always_tool", "proceed_always":
			g.two.allow("tool:" + server + "/" + tool)
		case "proceed_once":
		default:
			g.toolUpdate(tid, "failed", "Tool call rejected by the user.")
			return denied(""), nil
		}
		g.toolUpdate(tid, "in_progress")
	} else {
		g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"status", "in_progress"},
			{"title", title}, {"content", []obj{}}, {"locations", []obj{}}, {"kind", "other"}})
	}
	res, err := g.two.clients.call(ctx, srv, tool, args)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return fail(err.Error())
	}
	status := "completed"
	if res.isError {
		status = "failed"
	}
	g.toolUpdate(tid, status, res.text)
	return res.outcome(nil), nil
}
