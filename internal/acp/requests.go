package acp

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// request answers a request of the agent. Every request is answered:
// session/request_permission from the permission level (or by the
// session's Approve callback), anything else with "method not found",
// since the client offers no file system, no terminal and no other
// service.
func (p *Protocol) request(m *message, raw json.RawMessage) driver.Step {
	if m.Method == "session/request_permission" {
		return p.permission(m, raw)
	}
	reply := errorReply(m.ID, codeMethodNotFound, "Method not found: "+m.Method+" (this client offers no file system, no terminal and no "+m.Method+")")
	st := p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: fmt.Sprintf("%s asked the client for %s, which it does not offer; answered with an error", p.cfg.name(), m.Method), Raw: raw})
	st.Write = [][]byte{reply}
	return st
}

// permissionRequest is the part of session/request_permission the client
// uses.
type permissionRequest struct {
	ToolCall struct {
		ToolCallID string          `json:"toolCallId"`
		Kind       string          `json:"kind"`
		Title      string          `json:"title"`
		RawInput   json.RawMessage `json:"rawInput"`
		Content    json.RawMessage `json:"content"`
		Locations  []struct {
			Path string `json:"path"`
		} `json:"locations"`
	} `json:"toolCall"`
	Options []permissionOption `json:"options"`
}

// A permissionOption is one answer the agent offers.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// A permissionAnswer chooses an option of a request for permission.
type permissionAnswer int

const (
	answerCancel      permissionAnswer = iota // the outcome cancelled
	answerReject                              // reject_once, else reject_always
	answerAllowOnce                           // allow_once, else allow_always
	answerAllowAlways                         // allow_always for the call's tool, else allow_once
	answerTrustServer                         // allow_always for the call's MCP server, else allow_once
)

// permission answers session/request_permission. A call the ceiling (the
// permission level, or Config.Ceiling) does not allow is rejected at once,
// with a KindWarning event naming the level. A call it allows, and a call
// of an MCP server of the request (trusted at every level), is allowed at
// once without an Approve callback, and otherwise goes to the callback as
// a Step.Approvals entry, answered when the program decided. A turn being
// cancelled answers cancelled, as the protocol asks.
func (p *Protocol) permission(m *message, raw json.RawMessage) driver.Step {
	var r permissionRequest
	json.Unmarshal(m.Params, &r)
	tc := &r.ToolCall
	call := ToolCall{ID: tc.ToolCallID, Kind: tc.Kind, Title: tc.Title, Input: driver.ValidJSON(tc.RawInput), Content: driver.ValidJSON(tc.Content)}
	for _, l := range tc.Locations {
		if l.Path != "" {
			call.Paths = append(call.Paths, l.Path)
		}
	}
	for _, path := range diffPaths(tc.Content) {
		if !slices.Contains(call.Paths, path) {
			call.Paths = append(call.Paths, path)
		}
	}
	if st, ok := p.turn.calls[call.ID]; ok && call.Input == nil {
		// The update announcing the call usually says more.
		call.Input = st.input
	}
	call.Name = p.cfg.toolName(call.ID, call.Kind, call.Title)
	call.Server = p.mcpServer(call)
	call.MCP = call.Server != "" || isMCP(call)
	answer := func(a permissionAnswer) []byte {
		return result(m.ID, map[string]any{"outcome": choose(r.Options, a, p.cfg.AllowAlways)})
	}

	allowed := call.Server != "" || p.allowed(call)
	switch {
	case p.turn.cancelled:
		st := p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw})
		st.Write = [][]byte{answer(answerCancel)}
		return st
	case !allowed:
		st := p.turnStep(invoker.Event{Kind: invoker.KindWarning, Raw: raw,
			Text: fmt.Sprintf("%s asked to run %q (%s); declined under permission %s", p.cfg.name(), call.Title, call.Kind, p.perm)})
		st.Write = [][]byte{answer(answerReject)}
		return st
	case p.req.Approve == nil:
		a := answerAllowOnce
		if call.Server != "" {
			// The request's servers are trusted: one answer for
			// the rest of the session.
			a = answerTrustServer
		}
		st := p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw})
		st.Write = [][]byte{answer(a)}
		return st
	}
	// The program decides. The request stays pending until the engine
	// calls Answer or Cancel, or Interrupt withdraws it.
	id := string(m.ID)
	p.asking[id] = func() []byte { return answer(answerCancel) }
	once := func(line func() []byte) [][]byte {
		if _, ok := p.asking[id]; !ok {
			return nil // withdrawn by Interrupt, or answered
		}
		delete(p.asking, id)
		return [][]byte{line()}
	}
	req := p.approval(call, raw)
	ev := []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
	if _, seen := p.turn.calls[call.ID]; !seen && call.ID != "" && p.turn.inTurn {
		// Gemini CLI reports a call it asks about first in the request:
		// the program sees the call when it is asked.
		ev = p.tool(true, call.ID, "pending", call.Kind, call.Title, req.Tool.Input, nil, nil, raw)
	}
	st := p.turnStep(ev...)
	st.Approvals = []driver.Approval{{
		Request: req,
		Answer: func(d invoker.Decision) [][]byte {
			return once(func() []byte {
				switch {
				case !d.Allow:
					return answer(answerReject)
				case len(d.Input) > 0:
					// ACP carries no changed input: deny rather than
					// run the original.
					return answer(answerReject)
				case d.ForSession:
					return answer(answerAllowAlways)
				}
				return answer(answerAllowOnce)
			})
		},
		Cancel: func() [][]byte { return once(func() []byte { return answer(answerCancel) }) },
	}}
	return st
}

// withdraw answers every request for permission still waiting for the
// program with the outcome cancelled, as ACP asks of a client that
// cancels a turn.
func (p *Protocol) withdraw() [][]byte {
	var lines [][]byte
	for _, id := range slices.Sorted(maps.Keys(p.asking)) {
		lines = append(lines, p.asking[id]())
		delete(p.asking, id)
	}
	return lines
}

// approval describes call for the Approve callback.
func (p *Protocol) approval(call ToolCall, raw json.RawMessage) invoker.Approval {
	a := invoker.Approval{
		Kind:      approvalKind(call),
		Tool:      invoker.Tool{Name: call.Name, ID: call.ID, Input: call.Input},
		Paths:     call.Paths,
		SessionID: p.session,
		Raw:       raw,
	}
	var in struct {
		Command json.RawMessage `json:"command"`
		Cwd     string          `json:"cwd"`
	}
	json.Unmarshal(call.Input, &in)
	a.Cwd = in.Cwd
	if a.Kind == "command" {
		var s string
		var argv []string
		switch {
		case json.Unmarshal(in.Command, &s) == nil && s != "":
			a.Command = s
		case json.Unmarshal(in.Command, &argv) == nil && len(argv) > 0:
			a.Command = strings.Join(argv, " ")
		default:
			// Gemini CLI titles a shell call with its command.
			a.Command = call.Title
		}
	}
	if a.Tool.Input == nil {
		// Gemini CLI gives an MCP tool's arguments as the request's
		// text content, and no raw input.
		if obj := jsonObject(toolText(call.Content)); obj != nil {
			a.Tool.Input = obj
		} else if call.Title != "" {
			a.Tool.Input, _ = json.Marshal(map[string]string{"title": call.Title})
		}
	}
	return a
}

// approvalKind is the invoker.Approval kind of a call.
func approvalKind(call ToolCall) string {
	switch {
	case call.MCP:
		return "mcp_tool"
	case call.Kind == "execute":
		return "command"
	case call.Kind == "edit" || call.Kind == "delete" || call.Kind == "move":
		return "file_change"
	}
	return "tool"
}

// jsonObject returns s when it is a JSON object, else nil.
func jsonObject(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

// choose returns the outcome of answer a among options. pick, when not
// nil, chooses among the allow_always options (Config.AllowAlways).
func choose(options []permissionOption, a permissionAnswer, pick func(ids []string, server bool) string) map[string]string {
	cancelled := map[string]string{"outcome": "cancelled"}
	selected := func(id string) map[string]string {
		return map[string]string{"outcome": "selected", "optionId": id}
	}
	first := func(kinds ...string) (string, bool) {
		for _, kind := range kinds {
			for _, o := range options {
				if o.Kind == kind {
					return o.OptionID, true
				}
			}
		}
		return "", false
	}
	switch a {
	case answerReject:
		if id, ok := first("reject_once", "reject_always"); ok {
			return selected(id)
		}
	case answerAllowOnce:
		if id, ok := first("allow_once", "allow_always"); ok {
			return selected(id)
		}
	case answerAllowAlways, answerTrustServer:
		var ids []string
		for _, o := range options {
			if o.Kind == "allow_always" {
				ids = append(ids, o.OptionID)
			}
		}
		if len(ids) > 0 {
			id := ids[0]
			if pick != nil {
				if c := pick(ids, a == answerTrustServer); slices.Contains(ids, c) {
					id = c
				}
			}
			return selected(id)
		}
		if id, ok := first("allow_once"); ok {
			return selected(id)
		}
	}
	return cancelled
}

// allowed reports whether the ceiling allows call: Config.Ceiling, else
// Allowed. A panic in Ceiling declines.
func (p *Protocol) allowed(call ToolCall) (ok bool) {
	if p.cfg.Ceiling == nil {
		return Allowed(p.perm, call.Kind)
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return p.cfg.Ceiling(p.perm, call)
}

// mcpServer returns the name of the MCP server of the request that call
// is a tool of, or "". Agents name an MCP tool after its server: Gemini
// CLI titles it "TOOL (SERVER MCP Server)" and calls it
// "mcp_SERVER_TOOL", claude-code-acp "mcp__SERVER__TOOL".
func (p *Protocol) mcpServer(call ToolCall) string {
	best := ""
	for _, s := range p.req.MCPServers {
		n := s.Name
		if n == "" || len(n) <= len(best) {
			continue
		}
		if strings.HasSuffix(call.Title, "("+n+" MCP Server)") ||
			strings.HasPrefix(call.Name, "mcp__"+n+"__") || strings.HasPrefix(call.Title, "mcp__"+n+"__") ||
			strings.HasPrefix(call.Name, "mcp_"+n+"_") {
			best = n // the longest name that matches: "a_b" over "a"
		}
	}
	return best
}

// isMCP reports whether call looks like a tool of an MCP server, by the
// names agents give such tools (mcpServer).
func isMCP(call ToolCall) bool {
	return strings.HasSuffix(call.Title, " MCP Server)") || strings.HasPrefix(call.Name, "mcp_") || strings.HasPrefix(call.Title, "mcp__")
}

// diffPaths returns the paths of the diffs in a tool call's content.
func diffPaths(raw json.RawMessage) []string {
	var items []struct {
		Type string `json:"type"`
		Path string `json:"path"`
	}
	json.Unmarshal(raw, &items)
	var paths []string
	for _, it := range items {
		if it.Type == "diff" && it.Path != "" {
			paths = append(paths, it.Path)
		}
	}
	return paths
}
