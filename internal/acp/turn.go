package acp

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// turnState is what the turn in flight has established.
type turnState struct {
	inTurn     bool
	promptSent bool
	cancelled  bool // the client sent session/cancel (or would have)
	announced  bool // the turn's session event was sent

	// The message or reasoning being written: its kind (0 for none) and
	// its text so far.
	open    invoker.EventKind
	partial strings.Builder
	// The turn's whole messages, for the answer.
	messages []string

	usage    *invoker.Usage
	resetsAt time.Time // when the rate limit that failed the turn resets
	success  bool
	failure  error
	calls    map[string]toolState
}

// toolState is a tool call the turn reported.
type toolState struct {
	name  string
	input json.RawMessage
	ended bool
	// What the agent's updates said of the call, for its request for
	// permission (claude-code-acp's carries neither): that it is of a
	// kind of the agent's own tools (ownKind; kind is the last such), and
	// the name its _meta gives it.
	ownKind  bool
	kind     string
	metaName string
}

func (t *turnState) reset() {
	calls := t.calls
	clear(calls)
	*t = turnState{calls: calls}
}

// answer is the turn's answer: its messages, a blank line apart, with the
// message being written, if any.
func (t *turnState) answer() string {
	msgs := t.messages
	if t.open == invoker.KindMessage && t.partial.Len() > 0 {
		msgs = append(msgs[:len(msgs):len(msgs)], t.partial.String())
	}
	return strings.Join(msgs, "\n\n")
}

// flush ends the message or reasoning being written, if any, and returns
// it whole. raw is the line that ended it.
func (t *turnState) flush(raw json.RawMessage) []invoker.Event {
	kind, text := t.open, t.partial.String()
	t.open = 0
	t.partial.Reset()
	if kind == 0 || text == "" {
		return nil
	}
	if kind == invoker.KindMessage {
		t.messages = append(t.messages, text)
	}
	return []invoker.Event{{Kind: kind, Text: text, Raw: raw}}
}

// chunk adds text to the message or reasoning (kind) being written, ending
// one of the other kind first.
func (t *turnState) chunk(kind invoker.EventKind, text string, raw json.RawMessage) []invoker.Event {
	var evs []invoker.Event
	if t.open != kind {
		evs = t.flush(raw)
		t.open = kind
	}
	t.partial.WriteString(text)
	return append(evs, invoker.Event{Kind: invoker.KindDelta, Delta: kind, Text: text, Raw: raw})
}

// update maps one session/update notification to the turn's events.
// Updates between turns (the history a session/load replays) are
// dropped; updates the client has no kind for are passed on as KindRaw.
func (p *Protocol) update(params json.RawMessage, raw json.RawMessage) driver.Step {
	var u struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string          `json:"sessionUpdate"`
			Content       json.RawMessage `json:"content"`
			ToolCallID    string          `json:"toolCallId"`
			Status        string          `json:"status"`
			Title         string          `json:"title"`
			Kind          string          `json:"kind"`
			RawInput      json.RawMessage `json:"rawInput"`
			RawOutput     json.RawMessage `json:"rawOutput"`
			Meta          callMeta        `json:"_meta"`
			CurrentModeID string          `json:"currentModeId"`
		} `json:"update"`
	}
	if err := json.Unmarshal(params, &u); err != nil {
		return p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: "a session/update that does not decode: " + err.Error(), Raw: raw})
	}
	up := &u.Update
	if up.SessionUpdate == "current_mode_update" && up.CurrentModeID != "" {
		p.mode = up.CurrentModeID // the agent may switch modes itself
	}
	if !p.turn.inTurn {
		return driver.Step{}
	}
	rawEv := invoker.Event{Kind: invoker.KindRaw, Raw: raw}
	if u.SessionID != "" && u.SessionID != p.session {
		return p.turnStep(rawEv) // another session's (a sub-agent's)
	}
	t := &p.turn
	switch up.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		text, ok := textBlock(up.Content)
		if !ok {
			return p.turnStep(rawEv) // an image, a resource: not text
		}
		kind := invoker.KindMessage
		if up.SessionUpdate == "agent_thought_chunk" {
			kind = invoker.KindReasoning
		}
		return p.turnStep(t.chunk(kind, text, raw)...)
	case "tool_call", "tool_call_update":
		evs := t.flush(raw)
		evs = append(evs, p.tool(up.SessionUpdate == "tool_call", up.ToolCallID, up.Status, up.Kind, up.Title, up.RawInput, up.Content, up.RawOutput, raw)...)
		t.note(up.ToolCallID, up.Kind, up.Meta.name())
		return p.turnStep(evs...)
	}
	// plan, available_commands_update, current_mode_update,
	// usage_update, user_message_chunk, ...: nothing the other kinds
	// describe, and never lost.
	return p.turnStep(rawEv)
}

// tool maps a tool_call or tool_call_update: the call when first seen, its
// result when it completed or failed, else the raw line.
func (p *Protocol) tool(isNew bool, id, status, kind, title string, input, content, output, raw json.RawMessage) []invoker.Event {
	t := &p.turn
	var evs []invoker.Event
	c, seen := t.calls[id]
	if !seen {
		in := driver.ValidJSON(input)
		if in == nil && title != "" {
			in, _ = json.Marshal(map[string]string{"title": title})
		}
		c = toolState{name: p.cfg.toolName(id, kind), input: in}
		evs = append(evs, invoker.Event{Kind: invoker.KindToolCall, Raw: raw,
			Tool: &invoker.Tool{Name: c.name, ID: id, Input: c.input, Status: status}})
	}
	if (status == "completed" || status == "failed") && !c.ended {
		c.ended = true
		out := toolText(content)
		if out == "" && len(driver.ValidJSON(output)) > 0 {
			var s string
			if json.Unmarshal(output, &s) != nil {
				s = string(output)
			}
			out = s
		}
		evs = append(evs, invoker.Event{Kind: invoker.KindToolResult, Raw: raw, Tool: &invoker.Tool{
			Name: c.name, ID: id, Input: c.input, Output: out, Status: status,
		}})
	}
	t.calls[id] = c
	if len(evs) == 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindRaw, Raw: raw})
	}
	return evs
}

// note records what an update or a request for permission said of the
// call id: its kind and the name its _meta gives it. A kind of the agent's
// own tools, once given, stays.
func (t *turnState) note(id, kind, metaName string) {
	c, ok := t.calls[id]
	if !ok {
		return
	}
	if ownKind(kind) {
		c.ownKind, c.kind = true, kind
	}
	if metaName != "" {
		if c.metaName != "" && c.metaName != metaName {
			c.ownKind = true // two names for one call: not a server's
		}
		c.metaName = metaName
	}
	t.calls[id] = c
}

// textBlock returns the text of a text content block.
func textBlock(raw json.RawMessage) (string, bool) {
	var c struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "text" {
		return "", false
	}
	return c.Text, true
}

// toolText joins the text of a tool call's content: content blocks, and
// diffs' paths.
func toolText(raw json.RawMessage) string {
	var items []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Path    string          `json:"path"`
	}
	json.Unmarshal(raw, &items)
	var parts []string
	for _, it := range items {
		switch it.Type {
		case "content":
			if s, ok := textBlock(it.Content); ok && s != "" {
				parts = append(parts, s)
			}
		case "diff":
			parts = append(parts, "diff "+it.Path)
		}
	}
	return strings.Join(parts, "\n")
}
