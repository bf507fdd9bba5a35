package fakeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// claudeTwoWay is the state of Claude Code's two-way control in one
// session: the replies awaited, what the session allowed, and the MCP
// servers of --mcp-config.
type claudeTwoWay struct {
	replies pendingReplies
	mu      sync.Mutex
	allowed []string // rules allowed for the session: "Bash", "Bash(cmd)", "mcp__srv"
	// acceptEdits is the mode acceptEdits, set for the session.
	acceptEdits bool
	servers     []mcpServer
	clients     mcpClients
	inband      map[string]*inbandServer // by server name, once initialized
	// print orders the printing of parallel tool calls (Script.AskCount),
	// which share the agent's message state, and guards denials.
	print   sync.Mutex
	denials []obj // the turn's permission_denials
}

// inbandServer counts the JSON-RPC ids of one SDK server's messages.
type inbandServer struct{ next int }

// claudeSessionSetup reads the MCP servers of --mcp-config.
func (a *agent) claudeSessionSetup() error {
	a.claude = &claudeTwoWay{}
	for _, v := range flagValues(a.args, "--mcp-config") {
		b := []byte(v)
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			var err error
			if b, err = os.ReadFile(v); err != nil {
				return fmt.Errorf("--mcp-config: %w", err)
			}
		}
		var cfg struct {
			MCPServers map[string]struct {
				Type    string            `json:"type"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("--mcp-config: %w", err)
		}
		for name, c := range cfg.MCPServers {
			s := mcpServer{Name: name, URL: c.URL, Headers: c.Headers, Command: c.Command, Args: c.Args, SDK: c.Type == "sdk"}
			for k, v := range c.Env {
				s.Env = append(s.Env, k+"="+v)
			}
			a.claude.servers = append(a.claude.servers, s)
		}
	}
	return nil
}

// claudeMCPStatus lists the MCP servers for the system init event.
func (a *agent) claudeMCPStatus() []obj {
	out := []obj{}
	if a.claude == nil {
		return out
	}
	for _, n := range serverNames(a.claude.servers) {
		out = append(out, obj{{"name", n}, {"status", "connected"}})
	}
	return out
}

// claudeReply routes the response of a control_response line of the
// client's to the request it answers.
func (a *agent) claudeReply(resp json.RawMessage) {
	var r struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(resp, &r) == nil && a.claude != nil {
		a.claude.replies.deliver(r.RequestID, resp)
	}
}

// claudeDuring runs op with a context that an interrupt request of the
// client's (on intr) cancels, acknowledging the interrupt, and reports
// whether op ran to its end.
func (a *agent) claudeDuring(intr <-chan string, op func(context.Context) (outcomes, error)) (outcomes, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out outcomes
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := op(ctx)
		done <- result{out, err}
	}()
	for {
		select {
		case r := <-done:
			return r.out, r.err == nil
		case id := <-intr:
			if a.s.IgnoreInterrupt {
				continue
			}
			cancel()
			<-done
			a.controlOK(id)
			return nil, false
		}
	}
}

// claudeControl sends a control request and waits for its response's
// payload (response.response), or for ctx.
func (a *agent) claudeControl(ctx context.Context, request obj) (json.RawMessage, error) {
	id := uuid4()
	b, err := a.claude.replies.request(ctx, id, func() {
		a.emit(obj{{"type", "control_request"}, {"request_id", id}, {"request", request}})
	})
	if err != nil {
		return nil, err
	}
	var r struct {
		Subtype  string          `json:"subtype"`
		Error    string          `json:"error"`
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Subtype != "success" {
		return nil, fmt.Errorf("control request failed: %s", r.Error)
	}
	return r.Response, nil
}

// A verdict is what became of a permission question.
type verdict struct {
	allow   bool
	message string          // why it was denied
	input   json.RawMessage // a changed input, when allowed
}

// claudeEditTools are Claude Code's tools that change files, which the
// mode acceptEdits lets change the files of the working directory.
var claudeEditTools = map[string]bool{"Edit": true, "MultiEdit": true, "Write": true, "NotebookEdit": true}

// claudeAllowedByFlags reports whether Claude Code's flags (and what the
// session allowed) let tool run with command, or change the file path,
// without asking, or deny it.
func (a *agent) claudeAllowedByFlags(tool, command, path string) (allow, deny bool) {
	matches := func(rules []string) bool {
		for _, r := range rules {
			for _, r := range strings.FieldsFunc(r, func(c rune) bool { return c == ',' || c == ' ' }) {
				switch {
				case r == tool, r == tool+"("+command+")":
					return true
				case strings.HasPrefix(tool, "mcp__") && strings.HasPrefix(tool, r+"__"):
					return true
				case strings.HasSuffix(r, ":*)") && strings.HasPrefix(r, tool+"(") && strings.HasPrefix(command, strings.TrimSuffix(strings.TrimPrefix(r, tool+"("), ":*)")):
					return true
				}
			}
		}
		return false
	}
	if matches(flagValues(a.args, "--disallowedTools", "--disallowed-tools")) {
		return false, true
	}
	if mode, _ := flagValue(a.args, "--permission-mode"); mode == "bypassPermissions" || slices.Contains(a.args, "--dangerously-skip-permissions") {
		return true, false
	}
	a.claude.mu.Lock()
	allowed := slices.Clone(a.claude.allowed)
	acceptEdits := a.claude.acceptEdits
	a.claude.mu.Unlock()
	if mode, _ := flagValue(a.args, "--permission-mode"); mode == "acceptEdits" {
		acceptEdits = true
	}
	if acceptEdits && claudeEditTools[tool] && inWorkdir(path) {
		return true, false
	}
	return matches(append(allowed, flagValues(a.args, "--allowedTools", "--allowed-tools")...)), false
}

// inWorkdir reports whether the absolute path is in the working
// directory.
func inWorkdir(path string) bool {
	wd, err := os.Getwd()
	return err == nil && path != "" && strings.HasPrefix(path, wd+string(filepath.Separator))
}

// claudePermission decides whether tool may run with input (running
// command, or changing the file path): by the flags, or by asking the
// client (can_use_tool) under --permission-prompt-tool stdio, as Claude
// Code does in -p mode.
func (a *agent) claudePermission(ctx context.Context, tool string, input obj, command, path, toolUseID string) (verdict, error) {
	allow, deny := a.claudeAllowedByFlags(tool, command, path)
	switch {
	case deny:
		return verdict{message: "Permission to use " + tool + " has been denied."}, nil
	case allow:
		return verdict{allow: true}, nil
	}
	if v, _ := flagValue(a.args, "--permission-prompt-tool"); v != "stdio" {
		return verdict{message: "Claude requested permissions to use " + tool + ", but you haven't granted it yet."}, nil
	}
	// Claude Code suggests a rule for the tool (and command), or, for an
	// edit, the mode that accepts edits.
	rule := obj{{"toolName", tool}}
	if command != "" {
		rule = append(rule, kv{"ruleContent", command})
	}
	suggestion := obj{{"type", "addRules"}, {"rules", []obj{rule}}, {"behavior", "allow"}, {"destination", "session"}}
	if claudeEditTools[tool] {
		suggestion = obj{{"type", "setMode"}, {"mode", "acceptEdits"}, {"destination", "session"}}
	}
	b, err := a.claudeControl(ctx, obj{{"subtype", "can_use_tool"}, {"tool_name", tool}, {"input", input},
		{"permission_suggestions", []obj{suggestion}}, {"tool_use_id", toolUseID}})
	if ctx.Err() != nil {
		return verdict{}, ctx.Err()
	}
	if err != nil {
		return verdict{message: err.Error()}, nil
	}
	var r struct {
		Behavior           string          `json:"behavior"`
		Message            string          `json:"message"`
		UpdatedInput       json.RawMessage `json:"updatedInput"`
		UpdatedPermissions []struct {
			Type     string `json:"type"`
			Behavior string `json:"behavior"`
			Mode     string `json:"mode"`
			Rules    []struct {
				ToolName    string `json:"toolName"`
				RuleContent string `json:"ruleContent"`
			} `json:"rules"`
		} `json:"updatedPermissions"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return verdict{message: "malformed permission response: " + err.Error()}, nil
	}
	if r.Behavior != "allow" {
		return verdict{message: r.Message}, nil
	}
	for _, p := range r.UpdatedPermissions {
		if p.Type == "setMode" && p.Mode == "acceptEdits" {
			a.claude.mu.Lock()
			a.claude.acceptEdits = true
			a.claude.mu.Unlock()
		}
		if p.Type != "addRules" || p.Behavior != "allow" {
			continue
		}
		a.claude.mu.Lock()
		for _, rl := range p.Rules {
			if rl.RuleContent != "" {
				a.claude.allowed = append(a.claude.allowed, rl.ToolName+"("+rl.RuleContent+")")
			} else {
				a.claude.allowed = append(a.claude.allowed, rl.ToolName)
			}
		}
		a.claude.mu.Unlock()
	}
	return verdict{allow: true, input: r.UpdatedInput}, nil
}

// claudeToolResult prints the user message carrying a tool's result
// block, with the tool_use_result Claude Code adds to it.
func (a *agent) claudeToolResult(block obj, result any) {
	a.emit(obj{{"type", "user"}, {"message", obj{{"role", "user"}, {"content", []obj{block}}}},
		{"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
		{"timestamp", timestamp()}, {"tool_use_result", result}})
}

// claudeDenied prints the tool result of a denied call and records the
// denial for the turn's result.
func (a *agent) claudeDenied(id, tool string, input obj, msg string) {
	a.claudeToolResult(obj{{"type", "tool_result"}, {"content", msg}, {"is_error", true}, {"tool_use_id", id}}, "Error: "+msg)
	a.claude.print.Lock()
	a.claude.denials = append(a.claude.denials, obj{{"tool_name", tool}, {"tool_use_id", id}, {"tool_input", input}})
	a.claude.print.Unlock()
}

// claudeUse has the model call tool with input (running command, or
// changing the file path), and asks whether it may (claudePermission).
// It returns the call's id and the changed input of an allow, if any;
// for a denial, which it reports, the outcome line.
func (a *agent) claudeUse(ctx context.Context, tool string, input obj, command, path string) (id string, changed json.RawMessage, deniedLine string, err error) {
	id = "toolu_" + randHex(12)
	a.claude.print.Lock()
	a.newMessage()
	a.assistant(obj{{"type", "tool_use"}, {"id", id}, {"name", tool}, {"input", input}})
	a.msgID = ""
	a.claude.print.Unlock()
	v, err := a.claudePermission(ctx, tool, input, command, path, id)
	if err != nil {
		return "", nil, "", err
	}
	if !v.allow {
		a.claudeDenied(id, tool, input, v.message)
		return id, nil, denied(v.message), nil
	}
	return id, v.input, "", nil
}

// claudeActions runs the turn's actions under ctx and returns their
// outcome lines; an error means ctx ended it.
func (a *agent) claudeActions(ctx context.Context) (outcomes, error) {
	return a.s.actions(ctx, turnActions{ask: a.claudeAsk, edit: a.claudeEdit, call: a.claudeCallTool})
}

// claudeAsk has the model call Bash with command, asks, and runs it if
// allowed.
func (a *agent) claudeAsk(ctx context.Context, command string) (string, error) {
	id, changed, line, err := a.claudeUse(ctx, "Bash", obj{{"command", command}, {"description", "Run " + command}}, command, "")
	if err != nil || line != "" {
		return line, err
	}
	if len(changed) > 0 {
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(changed, &in) == nil && in.Command != "" {
			command = in.Command
		}
	}
	output, code := runShell(ctx, command)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	a.claudeToolResult(obj{{"tool_use_id", id}, {"type", "tool_result"}, {"content", output}, {"is_error", code != 0}},
		obj{{"stdout", output}, {"stderr", ""}, {"interrupted", false}, {"isImage", false}, {"noOutputExpected", false}})
	return OutcomeApproved, nil
}

// claudeEdit has the model call Write for e, asks, and writes the file if
// allowed: the file_path and content of a changed input, if any.
func (a *agent) claudeEdit(ctx context.Context, e fileEdit) (string, error) {
	id, changed, line, err := a.claudeUse(ctx, "Write", obj{{"file_path", e.path}, {"content", e.content}}, "", e.path)
	if err != nil || line != "" {
		return line, err
	}
	if len(changed) > 0 {
		var in struct {
			FilePath *string `json:"file_path"`
			Content  *string `json:"content"`
		}
		if json.Unmarshal(changed, &in) == nil {
			if in.FilePath != nil && *in.FilePath != e.path {
				e = newFileEdit(*in.FilePath)
			}
			if in.Content != nil {
				e.content = *in.Content
			}
		}
	}
	line = e.write()
	kind, text := "create", "File created successfully at: "+e.path
	if e.old != nil {
		kind, text = "update", "The file "+e.path+" has been updated."
	}
	if line != OutcomeEdited {
		text = line
	}
	a.claudeToolResult(obj{{"tool_use_id", id}, {"type", "tool_result"}, {"content", text}, {"is_error", line != OutcomeEdited}},
		obj{{"type", kind}, {"filePath", e.path}, {"content", e.content}, {"structuredPatch", []obj{}}, {"originalFile", e.old}})
	return line, nil
}

// claudeCallTool has the model call CallTool's tool, asks if its flags
// say so, and calls it: in band for an SDK server, else as an MCP client.
func (a *agent) claudeCallTool(ctx context.Context) (string, error) {
	server, tool := toolTarget(a.s.CallTool)
	name := "mcp__" + server + "__" + tool
	args := a.s.toolArgs()
	input := obj{}
	for _, k := range sortedKeys(args) {
		input = append(input, kv{k, args[k]})
	}
	id := "toolu_" + randHex(12)
	a.newMessage()
	a.assistant(obj{{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", input}})
	a.msgID = ""
	srv, ok := findServer(a.claude.servers, server)
	if !ok {
		msg := "No such tool available: " + name
		a.claudeDenied(id, name, input, msg)
		return OutcomeToolFailed + ": " + msg, nil
	}
	v, err := a.claudePermission(ctx, name, input, "", "", id)
	if err != nil {
		return "", err
	}
	if !v.allow {
		a.claudeDenied(id, name, input, v.message)
		return denied(v.message), nil
	}
	if len(v.input) > 0 {
		json.Unmarshal(v.input, &args)
	}
	var res toolResult
	if srv.SDK {
		res, err = a.claudeInband(ctx, server, tool, args)
	} else {
		res, err = a.claude.clients.call(ctx, srv, tool, args)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	text := res.outcome(err)
	if err == nil {
		text = res.text
	}
	a.claudeToolResult(obj{{"tool_use_id", id}, {"type", "tool_result"}, {"content", []obj{{{"type", "text"}, {"text", text}}}},
		{"is_error", err != nil || res.isError}}, []obj{{{"type", "text"}, {"text", text}}})
	return res.outcome(err), nil
}

// claudeInband speaks MCP to the client's SDK server over mcp_message
// control requests: on first use, as Claude Code does, two clients at once,
// each numbering its requests from 0, send initialize,
// notifications/initialized and tools/list; then tools/list and tools/call
// on the second. A call that ctx ends is cancelled with
// notifications/cancelled.
func (a *agent) claudeInband(ctx context.Context, server, tool string, args map[string]any) (toolResult, error) {
	if a.claude.inband == nil {
		a.claude.inband = map[string]*inbandServer{}
	}
	st := a.claude.inband[server]
	rpcOn := func(st *inbandServer, method string, params any) (json.RawMessage, error) {
		msg := obj{{"jsonrpc", "2.0"}}
		id := -1
		if !strings.HasPrefix(method, "notifications/") {
			id = st.next
			st.next++
			msg = append(msg, kv{"id", id})
		}
		msg = append(msg, kv{"method", method}, kv{"params", params})
		b, err := a.claudeControl(ctx, obj{{"subtype", "mcp_message"}, {"server_name", server}, {"message", msg}})
		if ctx.Err() != nil {
			if id >= 0 {
				// As an MCP client cancels a request it gave up on;
				// the answer to this request is not awaited.
				a.emit(obj{{"type", "control_request"}, {"request_id", uuid4()}, {"request", obj{{"subtype", "mcp_message"},
					{"server_name", server}, {"message", obj{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
						{"params", obj{{"requestId", id}, {"reason", "The user aborted a request."}}}}}}}})
			}
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		var r struct {
			MCPResponse struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"mcp_response"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: malformed mcp_response: %w", method, err)
		}
		if e := r.MCPResponse.Error; e != nil {
			return nil, fmt.Errorf("%s: %s (%d)", method, e.Message, e.Code)
		}
		return r.MCPResponse.Result, nil
	}
	if st == nil {
		clients := []*inbandServer{{}, {}}
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				if _, err := rpcOn(c, "initialize", obj{{"protocolVersion", "2025-06-18"}, {"capabilities", obj{}},
					{"clientInfo", obj{{"name", "claude-code"}, {"version", claudeVersion}}}}); err != nil {
					errs[i] = err
					return
				}
				if _, err := rpcOn(c, "notifications/initialized", obj{}); err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = rpcOn(c, "tools/list", obj{})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return toolResult{}, err
		}
		st = clients[1]
		a.claude.inband[server] = st
	}
	rpc := func(method string, params any) (json.RawMessage, error) { return rpcOn(st, method, params) }
	b, err := rpc("tools/list", obj{})
	if err != nil {
		return toolResult{}, err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	json.Unmarshal(b, &list)
	if !slices.ContainsFunc(list.Tools, func(t struct {
		Name string `json:"name"`
	}) bool {
		return t.Name == tool
	}) {
		return toolResult{}, fmt.Errorf("server %q has no tool %q", server, tool)
	}
	b, err = rpc("tools/call", obj{{"name", tool}, {"arguments", args}})
	if err != nil {
		return toolResult{}, err
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return toolResult{}, errors.New("tools/call: malformed result")
	}
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return toolResult{text: strings.Join(parts, "\n"), isError: res.IsError}, nil
}

// sortedKeys returns the keys of m in order, for stable output.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// claudeDenials lists the turn's denied tool calls for its result.
func (a *agent) claudeDenials() []obj {
	if a.claude == nil || a.claude.denials == nil {
		return []obj{}
	}
	return a.claude.denials
}
