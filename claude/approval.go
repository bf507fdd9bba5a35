package claude

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// A session with an Approve callback runs Claude Code in the permission
// mode "default" at every level, with --permission-prompt-tool=stdio (the
// flag the Claude Agent SDKs pass for their can_use_tool callback; it is
// not in claude --help). Claude Code then asks before each action it does
// not allow by itself, with a control request such as
//
//	{"type":"control_request","request_id":ID,"request":{"subtype":"can_use_tool","tool_name":"Bash",
//	 "display_name":"Bash","input":{"command":"touch made","description":"..."},
//	 "permission_suggestions":[...],"blocked_path":"/w/made","tool_use_id":"toolu_..."}}
//
// and waits for the answer
//
//	{"type":"control_response","response":{"subtype":"success","request_id":ID,
//	 "response":{"behavior":"allow","updatedInput":INPUT}}}
//	{"type":"control_response","response":{"subtype":"success","request_id":ID,
//	 "response":{"behavior":"deny","message":"..."}}}
//
// A denial's message is the tool result the model reads (an error); an
// allow runs the tool with updatedInput, which Decision.Input replaces. When
// the turn is interrupted while a request waits, Claude Code withdraws it
// with {"type":"control_cancel_request","request_id":ID}, denies the tool
// and ends the turn; the request is then not answered. (Measured with
// 2.1.197.)
//
// The permission level stays the ceiling. The protocol denies, without
// asking, what is above it, with a message naming the level:
//
//   - ReadOnly: only the read-only tools (Read, Glob, Grep, LS,
//     NotebookRead, WebFetch, WebSearch, TodoWrite and the MCP resource
//     readers) and the tools of the request's MCP servers are asked
//     about; Bash, Edit, Write, NotebookEdit and every other tool are
//     denied. Edit, Write and NotebookEdit stay disallowed outright, and no
//     settings file is read, as for a read-only run; the Bash commands
//     Claude Code itself deems read-only (ls, cat, ...) still run without a
//     question, as they do without a callback.
//   - WorkspaceWrite: the edits of files inside the working directory
//     (Edit, MultiEdit, Write, NotebookEdit) are asked about too; an edit
//     outside it, Bash, and every other tool are denied. Each path the
//     request names (the tool's file_path or notebook_path, and Claude
//     Code's blocked_path) is judged as internal/workspace judges it:
//     relative to the working directory, with its symbolic links followed,
//     the agent CLIs' configuration (.claude, .git, CLAUDE_CONFIG_DIR,
//     ...) outside. An edit that names no file is denied.
//   - Unlimited: everything Claude Code asks about is asked about.
//
// A session's turn may lower the level (TurnRequest.Permission): with a
// callback, that changes the ceiling of the protocol, and the permission
// mode stays "default".
//
// Decision.ForSession is remembered by the protocol, per tool name: a later
// request for the same tool within the ceiling is allowed without asking
// the callback again. (Claude Code's own permission_suggestions would write
// a rule into the project's settings file, or allow a command everywhere.)
// Without a callback, a can_use_tool request (which Claude Code sends only
// when told to) is denied at once. So are a request that does not decode,
// and one that reuses the request_id of a request the program is still
// deciding: that one is denied with it, and the program's decision is not
// written, since an answer to the id could reach either question.

// toolKinds classify Claude Code's built-in tools for Approval.Kind and
// for the ceiling.
var (
	// readOnlyTools change nothing.
	readOnlyTools = map[string]bool{
		"Read": true, "Glob": true, "Grep": true, "LS": true, "NotebookRead": true,
		"WebFetch": true, "WebSearch": true, "TodoWrite": true, "TodoRead": true,
		"ListMcpResourcesTool": true, "ReadMcpResourceTool": true,
	}
	// editTools change files; their input names the file.
	editTools = map[string]bool{"Edit": true, "MultiEdit": true, "Write": true, "NotebookEdit": true}
	// commandTools run commands.
	commandTools = map[string]bool{"Bash": true}
)

// permissionRequest is the request of a can_use_tool control request.
type permissionRequest struct {
	ToolName       string          `json:"tool_name"`
	Input          json.RawMessage `json:"input"`
	ToolUseID      string          `json:"tool_use_id"`
	BlockedPath    string          `json:"blocked_path"`
	DecisionReason string          `json:"decision_reason"`
}

// toolInput holds the fields of a tool's input an Approval reports.
type toolInput struct {
	Command      string `json:"command"`
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
}

// approval returns the Approval of request r (line is the whole line),
// its paths in the form of internal/workspace's Abs (Claude Code takes a
// relative path in its working directory), and the paths as the request
// names them, which the ceiling judges.
func (p *protocol) approval(r *permissionRequest, line []byte) (a invoker.Approval, named []string) {
	a = invoker.Approval{
		Tool:      invoker.Tool{Name: r.ToolName, ID: r.ToolUseID, Input: driver.ValidJSON(r.Input)},
		Workdir:   p.ws.Dir(),
		Reason:    r.DecisionReason,
		SessionID: p.dec.sessionID,
		Raw:       driver.ValidJSON(bytes.Clone(line)),
	}
	var in toolInput
	_ = json.Unmarshal(r.Input, &in)
	named = []string{r.BlockedPath}
	switch {
	case commandTools[r.ToolName]:
		// Claude Code does not say where its shell is.
		a.Kind, a.Command, a.Cwd = invoker.ApprovalCommand, in.Command, a.Workdir
	case editTools[r.ToolName]:
		a.Kind = invoker.ApprovalFileChange
		named = []string{in.FilePath, in.NotebookPath, r.BlockedPath}
	default:
		if server, tool, ok := p.mcpTool(r.ToolName); ok {
			a.Kind = invoker.ApprovalMCPTool
			a.MCP.Server, a.MCP.Tool = server, tool
		} else {
			a.Kind = invoker.ApprovalTool
		}
	}
	named = slices.DeleteFunc(named, func(f string) bool { return f == "" })
	for _, f := range named {
		for _, abs := range p.ws.Abs(f, "") {
			if !slices.Contains(a.Paths, abs) {
				a.Paths = append(a.Paths, abs)
			}
		}
	}
	return a, named
}

// mcpTool reads the name of an MCP tool, mcp__SERVER__TOOL, as
// mcphost.Names reads it: a tool of a Go server of the request by its own
// name; else the longest Command or URL server of the request the name
// starts with (a name may hold "__"); else, when a Go server's name starts
// it, no server and no tool (a tool that server does not have is another
// server's, of Claude Code's settings: mcp__tools__admin__drop may be the
// tool drop of a server tools__admin); else the name up to the next "__",
// as Claude Code reads it.
func (p *protocol) mcpTool(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", "", false
	}
	server, tool, _ = p.names.Read(name, rest, "__")
	return server, tool, true
}

// ownTool reports whether name is a tool of one of the request's MCP
// servers (mcp__<server>__<tool>).
func (p *protocol) ownTool(name string) bool {
	server, _, ok := p.mcpTool(name)
	return ok && p.servers[server]
}

// aboveCeiling returns why a, asked for at the protocol's permission level,
// is above it, or "" when it is within; named are the paths the request
// names, as it names them.
func (p *protocol) aboveCeiling(a *invoker.Approval, named []string) string {
	name := a.Tool.Name
	if readOnlyTools[name] || p.ownTool(name) {
		return ""
	}
	switch p.ceiling {
	case invoker.Unlimited:
		return ""
	case invoker.WorkspaceWrite:
		if !editTools[name] {
			return name + " is above the permission level " + string(p.ceiling) + " of this session (only reads and edits inside the working directory may be approved)"
		}
		if len(named) == 0 {
			return name + " names no file, and the permission level " + string(p.ceiling) + " of this session allows edits inside the working directory only"
		}
		// Every path: the tool's own and Claude Code's blocked_path,
		// the one it resolved.
		for _, f := range named {
			if why := p.ws.Outside(f, ""); why != "" {
				return name + " of " + f + " is above the permission level " + string(p.ceiling) + " of this session: " + why
			}
		}
		return ""
	}
	return name + " is above the permission level " + string(invoker.ReadOnly) + " of this session (only reads may be approved)"
}

// canUseTool handles a can_use_tool control request: it answers it at
// once, or returns it as an Approval for the callback.
func (p *protocol) canUseTool(id string, raw json.RawMessage, line []byte) driver.Step {
	ev := invoker.Event{Kind: invoker.KindRaw, Raw: driver.ValidJSON(bytes.Clone(line))}
	step := driver.Step{Events: []invoker.Event{ev}}
	if w, ok := p.waiting[id]; ok {
		// A second question under the id of one the program is
		// deciding: an answer to the id could reach either, so both
		// are denied, and the program's decision is not written.
		delete(p.waiting, id)
		step.Events = append(step.Events, invoker.Event{Kind: invoker.KindWarning, Text: "claude asked twice under one request id " + id + "; both requests denied"})
		step.Write = [][]byte{
			p.deny(id, "Permission was denied: a second request came under the id of a request still being decided."),
			p.deny(id, "Permission to use "+w.tool+" was denied: a second request came under its id."),
		}
		return step
	}
	var r permissionRequest
	if err := json.Unmarshal(raw, &r); err != nil || r.ToolName == "" {
		step.Write = [][]byte{p.deny(id, "clinvoke could not read this permission request")}
		return step
	}
	if !p.asking {
		step.Write = [][]byte{p.deny(id, "Permission to use "+r.ToolName+" was denied: no approval callback was given")}
		return step
	}
	a, named := p.approval(&r, line)
	if why := p.aboveCeiling(&a, named); why != "" {
		step.Write = [][]byte{p.deny(id, "Permission to use "+r.ToolName+" was denied: "+why+".")}
		return step
	}
	if p.forSession[r.ToolName] {
		step.Write = [][]byte{p.allow(id, r.Input)}
		return step
	}
	w := &waitingUse{tool: r.ToolName}
	p.waiting[id] = w
	step.Approvals = []driver.Approval{{
		Request: a,
		Answer: func(d invoker.Decision) [][]byte {
			if !p.settle(id, w) {
				return nil
			}
			if !d.Allow {
				msg := d.Message
				if msg == "" {
					msg = "Permission to use " + r.ToolName + " was denied."
				}
				return [][]byte{p.deny(id, msg)}
			}
			input := r.Input
			if len(d.Input) > 0 {
				var obj map[string]json.RawMessage
				if json.Unmarshal(d.Input, &obj) != nil || obj == nil {
					return [][]byte{p.deny(id, "Permission to use "+r.ToolName+" was denied: the changed input the program gave is not a JSON object.")}
				}
				input = d.Input
			}
			if d.ForSession {
				p.forSession[r.ToolName] = true
			}
			return [][]byte{p.allow(id, input)}
		},
		Cancel: func() [][]byte {
			if !p.settle(id, w) {
				return nil
			}
			return [][]byte{p.deny(id, "Permission to use "+r.ToolName+" was denied: the turn ended before it was decided.")}
		},
	}}
	return step
}

// A waitingUse is a can_use_tool request the program is deciding.
type waitingUse struct{ tool string }

// settle reports whether w, the request id, still waits for an answer, and
// marks it answered. A request Claude Code withdrew
// (control_cancel_request), or that a second request under its id made
// void, is not answered, even when the id has come back since for a
// request of its own.
func (p *protocol) settle(id string, w *waitingUse) bool {
	if p.waiting[id] != w {
		return false
	}
	delete(p.waiting, id)
	return true
}

// allow returns the answer that runs the tool with input.
func (p *protocol) allow(id string, input json.RawMessage) []byte {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return success(id, map[string]any{"behavior": "allow", "updatedInput": input})
}

// deny returns the answer that denies the tool; the model reads message.
func (p *protocol) deny(id, message string) []byte {
	return success(id, map[string]any{"behavior": "deny", "message": message})
}

// success returns the control_response of subtype success to request id
// carrying response.
func success(id string, response any) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "control_response",
		"response": map[string]any{
			"subtype": "success", "request_id": id, "response": response,
		},
	})
	return b
}
