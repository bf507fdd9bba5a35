package gemini

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// Sessions (Invoker.OpenSession) run
//
//	gemini --acp [--model=M] [ExtraArgs...]
//
// which speaks the Agent Client Protocol (JSON-RPC 2.0, one message per
// line) on standard input and output (measured with 0.61.0 in
// docs/session-protocols.md). The session sends initialize (no file system
// or terminal offered to the agent), then session/new in Workdir, then, for
// WorkspaceWrite and Unlimited, session/set_mode "autoEdit" or "yolo". A
// session cannot resume one (Request.SessionID): session/load of 0.61.0
// does not load a saved conversation reliably (e2e's
// TestGeminiSessionLoadProbe); resume with Invoke, whose --resume works,
// also for the id of a session opened here. Each turn is a
// session/prompt, whose response ends the turn with its stop reason; the
// turn's events are the session/update notifications (agent message and
// thought chunks, tool calls and their updates). A cancelled turn is
// stopped with session/cancel; Gemini kills the turn's tools itself.
//
// In ACP's default mode Gemini declares its shell tool and asks for
// permission before each call that changes anything (session/request_permission);
// the session answers as Permission says: ReadOnly allows reading, searching
// and fetching only, WorkspaceWrite also editing, deleting and moving files,
// Unlimited (whose yolo mode asks nothing) everything. Gemini's cold start
// is slow (initialize answered after 3.4–3.9 s on an idle machine), which a
// session pays once.

var _ driver.SessionBackend = backend{}

// SessionCommand starts Gemini's ACP mode.
func (backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	if _, err := approvalMode(req.Permission); err != nil {
		return nil, err
	}
	if req.SessionID != "" {
		// session/load of a conversation saved in the same home and
		// workdir answers "No previous sessions found for this
		// project." in most tries and loads it in others (e2e's
		// TestGeminiSessionLoadProbe).
		return nil, driver.Unsupported("SessionID", "gemini 0.61.0's ACP mode does not reliably load a saved session; resume it with Invoke (Request.SessionID), one process per turn")
	}
	args := []string{"--acp"}
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	return &driver.Command{Args: append(args, req.ExtraArgs...)}, nil
}

// NewSessionProtocol returns the ACP driver of one session.
func (backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	return &acp{workdir: req.Workdir, perm: req.Permission, next: modeID, calls: make(map[string]call)}
}

// Request ids of the session's own calls.
const (
	initID = 1
	openID = 2
	modeID = 3
)

// acpModes are the ACP session modes of the permission levels.
var acpModes = map[invoker.Permission]string{invoker.WorkspaceWrite: "autoEdit", invoker.Unlimited: "yolo"}

type acp struct {
	workdir string
	perm    invoker.Permission
	next    int64
	session string

	// The turn in flight.
	inTurn    bool
	promptID  int64
	announced bool // the turn's session event was sent
	text      strings.Builder
	afterTool bool
	usage     invoker.Usage
	success   bool
	failure   *invoker.StreamError
	calls     map[string]call
}

type acpMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *acpError       `json:"error"`
}

// acpError is a JSON-RPC error; Gemini puts the reason in data.details
// and only "Internal error" in the message.
type acpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Details string `json:"details"`
	} `json:"data"`
}

func (e *acpError) text() string {
	if e.Data.Details != "" {
		return e.Message + ": " + e.Data.Details
	}
	return e.Message
}

func rpcCall(id int64, method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

func (p *acp) Open() ([][]byte, bool) {
	return [][]byte{rpcCall(initID, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	})}, false
}

func (p *acp) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	if n := utf16Len(t.Prompt); n > maxStdin {
		// Not a limit of ACP; kept so that a prompt Invoke refuses is
		// not accepted here.
		return nil, fmt.Errorf("%w: the prompt is %d UTF-16 code units long; gemini takes at most %d", invoker.ErrInvalidRequest, n, maxStdin)
	}
	p.next++
	p.inTurn, p.promptID, p.announced = true, p.next, false
	p.text.Reset()
	p.afterTool, p.usage, p.success, p.failure = false, invoker.Usage{}, false, nil
	clear(p.calls)
	return [][]byte{rpcCall(p.promptID, "session/prompt", map[string]any{
		"sessionId": p.session,
		"prompt":    []map[string]string{{"type": "text", "text": t.Prompt}},
	})}, nil
}

func (p *acp) Interrupt() [][]byte {
	if !p.inTurn {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]string{"sessionId": p.session}})
	return [][]byte{b}
}

func (p *acp) Decode(line []byte) (driver.Step, error) {
	raw := json.RawMessage(line)
	var m acpMessage
	if err := json.Unmarshal(line, &m); err != nil {
		// Gemini prints nothing but JSON-RPC on stdout in ACP mode;
		// anything else is shown, not fatal.
		return p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: "gemini printed a line that is not JSON-RPC: " + err.Error()}), nil
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return p.request(&m, raw), nil
	case m.Method == "session/update":
		if !p.inTurn {
			return driver.Step{}, nil // history replayed by session/load, mode notices
		}
		return driver.Step{Events: p.announce(p.update(m.Params, raw))}, nil
	case m.Method != "":
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	}
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	}
	switch {
	case id == initID:
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("gemini refused initialize: %s", m.Error.text())
		}
		return driver.Step{Write: [][]byte{rpcCall(openID, "session/new", map[string]any{"cwd": p.workdir, "mcpServers": []any{}})}}, nil
	case id == openID:
		if m.Error != nil {
			msg := m.Error.text()
			return driver.Step{}, &invoker.StreamError{Message: "gemini could not open a session: " + msg, Type: "session/new", Err: classify(msg)}
		}
		var r struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(m.Result, &r)
		p.session = r.SessionID
		ev := invoker.Event{Kind: invoker.KindSession, SessionID: p.session, Raw: raw}
		if mode := acpModes[p.perm]; mode != "" {
			return driver.Step{Events: []invoker.Event{ev}, Write: [][]byte{rpcCall(modeID, "session/set_mode", map[string]string{"sessionId": p.session, "modeId": mode})}}, nil
		}
		return driver.Step{Events: []invoker.Event{ev}, Ready: true}, nil
	case id == modeID:
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("gemini refused the mode %q for permission %s: %s", acpModes[p.perm], p.perm, m.Error.text())
		}
		return driver.Step{Ready: true}, nil
	case p.inTurn && id == p.promptID:
		return p.finish(&m, raw), nil
	}
	return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
}

// turnStep returns ev as a step of the turn in flight, or nothing between
// turns.
func (p *acp) turnStep(ev invoker.Event) driver.Step {
	if !p.inTurn {
		return driver.Step{}
	}
	return driver.Step{Events: p.announce([]invoker.Event{ev})}
}

// announce puts the session event first in a turn, as init is a run's.
func (p *acp) announce(evs []invoker.Event) []invoker.Event {
	if p.announced {
		return evs
	}
	p.announced = true
	return append([]invoker.Event{{Kind: invoker.KindSession, SessionID: p.session}}, evs...)
}

// update maps one session/update notification.
func (p *acp) update(params json.RawMessage, raw json.RawMessage) []invoker.Event {
	var u struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       json.RawMessage
			ToolCallID    string          `json:"toolCallId"`
			Status        string          `json:"status"`
			Title         string          `json:"title"`
			Kind          string          `json:"kind"`
			RawInput      json.RawMessage `json:"rawInput"`
		} `json:"update"`
	}
	json.Unmarshal(params, &u)
	up := u.Update
	switch up.SessionUpdate {
	case "agent_message_chunk":
		text := chunkText(up.Content)
		if p.afterTool && p.text.Len() > 0 && text != "" {
			p.text.WriteString("\n\n") // as Invoke keeps messages a tool call separates apart
		}
		if text != "" {
			p.afterTool = false
		}
		p.text.WriteString(text)
		return []invoker.Event{{Kind: invoker.KindMessage, Text: text, Raw: raw}}
	case "agent_thought_chunk":
		return []invoker.Event{{Kind: invoker.KindReasoning, Text: chunkText(up.Content), Raw: raw}}
	case "tool_call", "tool_call_update":
		var evs []invoker.Event
		c, seen := p.calls[up.ToolCallID]
		if !seen {
			p.afterTool = true
			input := driver.ValidJSON(up.RawInput)
			if input == nil && up.Title != "" {
				input, _ = json.Marshal(map[string]string{"title": up.Title})
			}
			c = call{name: toolName(up.ToolCallID, up.Kind), input: input}
			p.calls[up.ToolCallID] = c
			evs = append(evs, invoker.Event{Kind: invoker.KindToolCall, Raw: raw,
				Tool: &invoker.Tool{Name: c.name, ID: up.ToolCallID, Input: c.input, Status: up.Status}})
		}
		if up.Status == "completed" || up.Status == "failed" {
			evs = append(evs, invoker.Event{Kind: invoker.KindToolResult, Raw: raw, Tool: &invoker.Tool{
				Name: c.name, ID: up.ToolCallID, Input: c.input, Output: toolContent(up.Content), Status: up.Status,
			}})
		}
		if len(evs) > 0 {
			return evs
		}
	}
	return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
}

// toolName recovers Gemini's tool name from its call id
// ("run_shell_command__run_shell_command_1795567170161_0"), else the ACP
// kind ("execute").
func toolName(id, kind string) string {
	if name, _, ok := strings.Cut(id, "__"); ok && name != "" {
		return name
	}
	return kind
}

func chunkText(raw json.RawMessage) string {
	var c struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &c)
	return c.Text
}

// toolContent joins the text of a tool call's content blocks.
func toolContent(raw json.RawMessage) string {
	var blocks []struct {
		Type    string `json:"type"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Content.Text != "" {
			parts = append(parts, b.Content.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// finish handles the response to session/prompt: the end of the turn.
func (p *acp) finish(m *acpMessage, raw json.RawMessage) driver.Step {
	p.inTurn = false
	var evs []invoker.Event
	if m.Error != nil {
		msg := m.Error.text()
		p.failure = &invoker.StreamError{Message: msg, Type: "session/prompt", Err: classify(msg)}
		evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: msg, Raw: raw})
	} else {
		var r struct {
			StopReason string `json:"stopReason"`
			Meta       struct {
				Quota struct {
					TokenCount struct {
						InputTokens  int64 `json:"input_tokens"`
						OutputTokens int64 `json:"output_tokens"`
					} `json:"token_count"`
				} `json:"quota"`
			} `json:"_meta"`
		}
		json.Unmarshal(m.Result, &r)
		switch r.StopReason {
		case "end_turn":
			p.success = true
		case "cancelled":
			p.failure = &invoker.StreamError{Message: "the turn was cancelled", Type: "cancelled"}
		default:
			p.failure = &invoker.StreamError{Message: "the turn stopped: " + r.StopReason, Type: r.StopReason}
			evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: p.failure.Message, Raw: raw})
		}
		tc := r.Meta.Quota.TokenCount
		p.usage = invoker.Usage{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens}
		u := p.usage
		evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw})
	}
	evs = append(evs, invoker.Event{Kind: invoker.KindDone, Raw: raw})
	return driver.Step{Events: p.announce(evs), TurnEnded: true}
}

// request answers a request of Gemini's: permissions as the session's
// Permission allows, anything else (the session offers no file system or
// terminal) refused.
func (p *acp) request(m *acpMessage, raw json.RawMessage) driver.Step {
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	var note string
	if m.Method == "session/request_permission" {
		var r struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
			ToolCall struct {
				Kind  string `json:"kind"`
				Title string `json:"title"`
			} `json:"toolCall"`
		}
		json.Unmarshal(m.Params, &r)
		want := "reject_once"
		if allowed(p.perm, r.ToolCall.Kind) {
			want = "allow_once"
		}
		outcome := map[string]string{"outcome": "cancelled"}
		for _, o := range r.Options {
			if o.Kind == want {
				outcome = map[string]string{"outcome": "selected", "optionId": o.OptionID}
				break
			}
		}
		reply["result"] = map[string]any{"outcome": outcome}
		if want == "reject_once" {
			note = fmt.Sprintf("gemini asked to run %s (%s); declined under permission %s", r.ToolCall.Title, r.ToolCall.Kind, p.perm)
		}
	} else {
		reply["error"] = map[string]any{"code": -32601, "message": "not supported by clinvoke: " + m.Method}
		note = "gemini asked " + m.Method + "; clinvoke does not offer it"
	}
	b, _ := json.Marshal(reply)
	st := driver.Step{Write: [][]byte{b}}
	if note != "" {
		st.Events = p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: note, Raw: raw}).Events
	}
	return st
}

// allowed says whether a tool call of an ACP kind may run under perm.
func allowed(perm invoker.Permission, kind string) bool {
	switch kind {
	case "read", "search", "fetch", "think":
		return true
	case "edit", "delete", "move":
		return perm.Rank() >= 1
	}
	return perm == invoker.Unlimited
}

func (p *acp) Stderr(b []byte) error { return stallSignature(b) }

func (p *acp) Outcome(string) driver.Outcome {
	out := driver.Outcome{SessionID: p.session, Text: p.text.String(), Usage: p.usage, Success: p.success}
	if !p.success && p.failure != nil {
		se := *p.failure
		out.Err = &se
	}
	return out
}
