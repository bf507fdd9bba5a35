package fakeagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// acpTwoWay is the state of an ACP agent's two-way control: the mode,
// the MCP servers of session/new, and what the session allowed.
type acpTwoWay struct {
	mu      sync.Mutex
	byMode  bool // the mode decides what is asked (Gemini CLI's modes)
	mode    string
	servers []mcpServer
	allowed map[string]bool // "shell:<command>", "server:<name>", "tool:<server>/<tool>"
	clients mcpClients
	replies pendingReplies
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
	id := g.two.replies.newID()
	res, err := g.two.replies.request(ctx, strconv.Itoa(id), func() {
		g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"method", "session/request_permission"}, {"params", obj{
			{"sessionId", g.a.sid}, {"options", options}, {"toolCall", toolCall}}}})
	})
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

// asks reports whether the agent asks before a call of kind that the
// session has not allowed under any of keys: for Gemini CLI, never in yolo
// mode, nor for an edit in autoEdit mode.
func (t *acpTwoWay) asks(kind string, keys ...string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byMode && (t.mode == "yolo" || t.mode == "autoEdit" && kind == "edit") {
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

// textContent is a tool call's content holding text.
func textContent(text string) []obj {
	return []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", text}}}}}
}

// An acpCall is a tool call as Gemini CLI reports it.
type acpCall struct {
	id, title, kind    string
	content, locations []obj
}

// fields are the call's fields with status.
func (c acpCall) fields(status string) obj {
	return obj{{"toolCallId", c.id}, {"status", status}, {"title", c.title},
		{"content", c.content}, {"locations", c.locations}, {"kind", c.kind}}
}

// permit asks permission for call with options, unless the session
// allowed it under one of keys or the mode lets it run (then it only
// reports the call, in progress), and reports whether the call may go
// ahead. always maps the options that allow for the session to the key
// they allow; a rejection is reported as the call's failure.
func (g *acpAgent) permit(ctx context.Context, call acpCall, keys []string, options []obj, always map[string]string) (bool, error) {
	if !g.two.asks(call.kind, keys...) {
		call.content = []obj{} // as Gemini CLI reports a call it does not ask about
		g.update(append(obj{{"sessionUpdate", "tool_call"}}, call.fields("in_progress")...))
		return true, nil
	}
	opt, err := g.ask(ctx, call.fields("pending"), options)
	if err != nil {
		return false, err
	}
	if key, ok := always[opt]; ok {
		g.two.allow(key)
	} else if opt != "proceed_once" {
		g.toolUpdate(call.id, "failed", "Tool call rejected by the user.")
		return false, nil
	}
	g.toolUpdate(call.id, "in_progress")
	return true, nil
}

// acpAsk asks permission to run command (outside yolo mode, unless the
// session allowed it) and runs it if allowed.
func (g *acpAgent) acpAsk(ctx context.Context, command string) (string, error) {
	root, _, _ := strings.Cut(command, " ")
	key := "shell:" + root
	call := acpCall{id: "run_shell_command__run_shell_command_" + randHex(6), title: command, kind: "execute", content: []obj{}, locations: []obj{}}
	ok, err := g.permit(ctx, call, []string{key}, []obj{
		{{"optionId", "proceed_always"}, {"name", "Always Allow " + root}, {"kind", "allow_always"}},
		{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}, map[string]string{"proceed_always": key})
	if err != nil || !ok {
		return denied(""), err
	}
	output, code := runShell(ctx, command)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	status := "completed"
	if code != 0 {
		status = "failed"
	}
	g.toolUpdate(call.id, status, output)
	return OutcomeApproved, nil
}

// acpEdit asks permission to write e, as Gemini CLI asks before its
// write_file tool (outside yolo and autoEdit modes, unless the session
// allowed every edit), and writes the file if allowed.
func (g *acpAgent) acpEdit(ctx context.Context, e fileEdit) (string, error) {
	title := e.path
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, e.path); err == nil && !strings.HasPrefix(rel, "..") {
			title = rel
		}
	}
	var old any // null for a new file
	if e.old != nil {
		old = *e.old
	}
	diff := []obj{{{"type", "diff"}, {"path", e.path}, {"oldText", old}, {"newText", e.content}}}
	call := acpCall{id: "write_file__write_file_" + randHex(6), title: "Writing to " + title, kind: "edit",
		content: diff, locations: []obj{{{"path", e.path}}}}
	ok, err := g.permit(ctx, call, []string{"edit"}, []obj{
		{{"optionId", "proceed_always"}, {"name", "Allow All Edits"}, {"kind", "allow_always"}},
		{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}, map[string]string{"proceed_always": "edit"}) // Gemini CLI then accepts every edit (autoEdit)
	if err != nil || !ok {
		return denied(""), err
	}
	line := e.write()
	if line != OutcomeEdited {
		g.toolUpdate(call.id, "failed", line)
		return line, nil
	}
	g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", call.id}, {"status", "completed"}, {"content", diff}})
	return line, nil
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
	g.two.mu.Lock()
	srv, ok := findServer(g.two.servers, server)
	g.two.mu.Unlock()
	// Gemini CLI's id: the tool's registry name, "__", and an id of its own.
	name := "mcp_" + server + "_" + tool
	// Its content is the call's arguments, as JSON text.
	argText, _ := json.Marshal(args)
	call := acpCall{id: name + "__" + name + "_" + randHex(6), title: tool + " (" + server + " MCP Server)",
		kind: "other", content: textContent(string(argText)), locations: []obj{}}
	fail := func(msg string) (string, error) {
		g.toolUpdate(call.id, "failed", msg)
		return OutcomeToolFailed + ": " + msg, nil
	}
	if !ok {
		return fail("Tool \"mcp_" + server + "_" + tool + "\" not found in registry.")
	}
	toolKey := "tool:" + server + "/" + tool
	allowed, err := g.permit(ctx, call, []string{"server:" + server, toolKey}, []obj{
		{{"optionId", "proceed_always_server"}, {"name", "Always Allow " + server}, {"kind", "allow_always"}},
		{{"optionId", "proceed_always_tool"}, {"name", "Always Allow " + tool}, {"kind", "allow_always"}},
		{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}, map[string]string{"proceed_always_server": "server:" + server, "proceed_always_tool": toolKey, "proceed_always": toolKey})
	if err != nil || !allowed {
		return denied(""), err
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
	g.toolUpdate(call.id, status, res.text)
	return res.outcome(nil), nil
}
