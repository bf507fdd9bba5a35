package acp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
		Meta callMeta `json:"_meta"`
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

// waiting is a request for permission waiting for the program's decision:
// the lines that withdraw it (cancelled) and reject it.
type waiting struct {
	cancel, reject func() []byte
}

// requestKey is the key of a JSON-RPC id of the agent's in
// Protocol.asking: 7, 7.0 and "7" are one key, since an agent may keep its
// requests by the id's text.
func requestKey(id json.RawMessage) string {
	if n, ok := idKey(id); ok {
		return strconv.FormatInt(n, 10)
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// permission answers session/request_permission. A call the ceiling (the
// permission level, or Config.Ceiling, and below Unlimited the paths of an
// edit, which must be inside the working directory) does not allow is
// rejected at once, with a KindWarning event saying why. A call it allows,
// and a call of an MCP server of the request (trusted at every level, when
// structured fields prove it: see servers.go), is allowed at once without
// an Approve callback, and otherwise goes to the callback as a
// Step.Approvals entry, answered when the program decided. A turn being
// cancelled answers cancelled, as the protocol asks. A request that does
// not decode, whose id is null, or that reuses the id of one still
// waiting for the program, is rejected at once (and the waiting one with it: an answer to that id
// could reach either).
func (p *Protocol) permission(m *message, raw json.RawMessage) driver.Step {
	var r permissionRequest
	decodeErr := json.Unmarshal(m.Params, &r)
	answer := func(a permissionAnswer) []byte {
		return result(m.ID, map[string]any{"outcome": choose(r.Options, a, p.cfg.AllowAlways)})
	}
	reject := func(why string) driver.Step {
		st := p.turnStep(invoker.Event{Kind: invoker.KindWarning, Raw: raw, Text: why})
		st.Write = [][]byte{answer(answerReject)}
		return st
	}
	if string(m.ID) == "null" {
		// An answer to null answers no request: the agent could apply
		// it to any.
		return reject(fmt.Sprintf("%s asked for permission with a null request id; rejected", p.cfg.name()))
	}
	id := requestKey(m.ID)
	if w, ok := p.asking[id]; ok {
		// An answer to this id could reach either question: neither
		// is allowed.
		delete(p.asking, id)
		st := reject(fmt.Sprintf("%s asked twice under one request id %s; both requests rejected", p.cfg.name(), m.ID))
		st.Write = append(st.Write, w.reject())
		return st
	}
	if decodeErr != nil {
		return reject(fmt.Sprintf("%s asked for permission with a request that does not decode (%v); rejected", p.cfg.name(), decodeErr))
	}
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
	announced, seen := p.turn.calls[call.ID]
	if seen && call.Input == nil {
		// The update announcing the call usually says more.
		call.Input = announced.input
	}
	if call.Kind == "" && announced.ownKind {
		// claude-code-acp gives the kind in the update only; the
		// level judges the call by it.
		call.Kind = announced.kind
	}
	call.Name = p.cfg.toolName(call.ID, call.Kind)
	names := p.provenNames(call.ID, tc.Meta.name())
	call.MCP, call.Server = p.serverTool(tc.Kind, announced.ownKind, names)

	why := p.aboveCeiling(call)
	switch {
	case p.turn.cancelled:
		st := p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw})
		st.Write = [][]byte{answer(answerCancel)}
		return st
	case why != "":
		return reject(fmt.Sprintf("%s asked to run %q (%s); declined: %s", p.cfg.name(), call.Title, cmp.Or(call.Kind, "no kind"), why))
	case p.granted[grantKey(call)]:
		// Allowed for the session by the program, and within the
		// level: once, as the grant was answered.
		st := p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw})
		st.Write = [][]byte{answer(answerAllowOnce)}
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
	w := &waiting{cancel: func() []byte { return answer(answerCancel) }, reject: func() []byte { return answer(answerReject) }}
	p.asking[id] = w
	once := func(line func() []byte) [][]byte {
		if p.asking[id] != w {
			// Withdrawn by Interrupt, rejected as a duplicate (the id
			// may be another request's since), or answered.
			return nil
		}
		delete(p.asking, id)
		return [][]byte{line()}
	}
	req := p.approval(call, names, raw)
	ev := []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
	if !seen && call.ID != "" && p.turn.inTurn {
		// Gemini CLI reports a call it asks about first in the request:
		// the program sees the call when it is asked.
		ev = p.tool(true, call.ID, "pending", call.Kind, call.Title, req.Tool.Input, nil, nil, raw)
		p.turn.note(call.ID, call.Kind, tc.Meta.name())
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
				case d.ForSession && p.judgesPaths(call):
					// The agent's allow_always would take the grant
					// out of the judge's hands: Gemini CLI switches
					// the session to autoEdit, where no later edit
					// is asked. The protocol keeps it instead.
					p.granted[grantKey(call)] = true
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

// aboveCeiling returns why call is above the ceiling of the level in
// force, or "" when it is within: a tool of a server of the request is
// within at every level; any other call must be allowed by the level
// (Config.Ceiling, else Allowed), and below Unlimited a call that changes
// files must name its files, each inside the working directory.
func (p *Protocol) aboveCeiling(call ToolCall) string {
	if call.Server != "" {
		return ""
	}
	if !p.allowed(call) {
		return "above the permission level " + string(p.level())
	}
	if !changesFiles(call.Kind) || p.level() == invoker.Unlimited {
		return ""
	}
	if len(call.Paths) == 0 {
		return "it names no file, and permission " + string(p.level()) + " allows changes inside the working directory only"
	}
	for _, path := range call.Paths {
		if why := p.ws.Outside(path, ""); why != "" {
			return fmt.Sprintf("%s is not within permission %s: %s", path, p.level(), why)
		}
	}
	return ""
}

// judgesPaths reports whether the level in force judges the paths of
// call: a call that changes files, below Unlimited.
func (p *Protocol) judgesPaths(call ToolCall) bool {
	return call.Server == "" && changesFiles(call.Kind) && p.level() != invoker.Unlimited
}

// grantKey is the key of call in Protocol.granted: its kind and its tool.
func grantKey(call ToolCall) string { return call.Kind + "\x00" + call.Name }

// level is the permission level in force.
func (p *Protocol) level() invoker.Permission {
	if p.perm == "" {
		return invoker.ReadOnly
	}
	return p.perm
}

// changesFiles reports whether kind is one of ACP's kinds of a tool that
// changes files.
func changesFiles(kind string) bool {
	return kind == "edit" || kind == "delete" || kind == "move"
}

// withdraw answers every request for permission still waiting for the
// program with the outcome cancelled, as ACP asks of a client that
// cancels a turn.
func (p *Protocol) withdraw() [][]byte {
	var lines [][]byte
	for _, id := range slices.Sorted(maps.Keys(p.asking)) {
		lines = append(lines, p.asking[id].cancel())
		delete(p.asking, id)
	}
	return lines
}

// approval describes call for the Approve callback, names being the
// names proven for it (see servers.go). Its paths are in the form of
// internal/workspace's Abs: a relative path is taken in the working
// directory (ACP asks for absolute ones), a command's relative cwd too.
func (p *Protocol) approval(call ToolCall, names []string, raw json.RawMessage) invoker.Approval {
	a := invoker.Approval{
		Kind:      approvalKind(call),
		Tool:      invoker.Tool{Name: call.Name, ID: call.ID, Input: call.Input},
		Workdir:   p.ws.Dir(),
		SessionID: p.session,
		Raw:       raw,
	}
	for _, path := range call.Paths {
		for _, abs := range p.ws.Abs(path, "") {
			if !slices.Contains(a.Paths, abs) {
				a.Paths = append(a.Paths, abs)
			}
		}
	}
	if call.MCP {
		a.MCP.Server, a.MCP.Tool = p.mcpNames(names)
	}
	var in struct {
		Command json.RawMessage `json:"command"`
		Cwd     string          `json:"cwd"`
	}
	json.Unmarshal(call.Input, &in)
	if a.Kind == invoker.ApprovalCommand {
		a.Cwd = a.Workdir
		if cwd := p.ws.Abs(in.Cwd, ""); len(cwd) > 0 {
			a.Cwd = cwd[0] // the kernel's reading: the process changes to it
		}
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
		return invoker.ApprovalMCPTool
	case call.Kind == "execute":
		return invoker.ApprovalCommand
	case changesFiles(call.Kind):
		return invoker.ApprovalFileChange
	}
	return invoker.ApprovalTool
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
