package acp

import (
	"encoding/json"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// request answers a request of the agent. Every request is answered:
// session/request_permission from the permission level, anything else
// with "method not found", since the client offers no file system, no
// terminal and no other service.
func (p *Protocol) request(m *message, raw json.RawMessage) driver.Step {
	if m.Method == "session/request_permission" {
		return p.permission(m, raw)
	}
	reply := errorReply(m.ID, codeMethodNotFound, "Method not found: "+m.Method+" (this client offers no file system, no terminal and no "+m.Method+")")
	st := p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: fmt.Sprintf("%s asked the client for %s, which it does not offer; answered with an error", p.cfg.name(), m.Method), Raw: raw})
	st.Write = [][]byte{reply}
	return st
}

// permission answers session/request_permission with the option that
// allows the call once (or always) when the permission level (or
// Config.Approve) allows it, else the one that rejects it, else the
// outcome cancelled. A turn being cancelled answers cancelled, as the
// protocol asks.
func (p *Protocol) permission(m *message, raw json.RawMessage) driver.Step {
	var r struct {
		ToolCall struct {
			ToolCallID string          `json:"toolCallId"`
			Kind       string          `json:"kind"`
			Title      string          `json:"title"`
			RawInput   json.RawMessage `json:"rawInput"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	json.Unmarshal(m.Params, &r)
	call := ToolCall{ID: r.ToolCall.ToolCallID, Kind: r.ToolCall.Kind, Title: r.ToolCall.Title, Input: driver.ValidJSON(r.ToolCall.RawInput)}
	if tc, ok := p.turn.calls[call.ID]; ok {
		// The update announcing the call usually says more.
		if call.Input == nil {
			call.Input = tc.input
		}
	}
	allow := p.approve(call)
	want := []string{"reject_once", "reject_always"}
	if allow {
		want = []string{"allow_once", "allow_always"}
	}
	outcome := map[string]string{"outcome": "cancelled"}
	if !p.turn.cancelled {
	choose:
		for _, kind := range want {
			for _, o := range r.Options {
				if o.Kind == kind {
					outcome = map[string]string{"outcome": "selected", "optionId": o.OptionID}
					break choose
				}
			}
		}
	}
	ev := invoker.Event{Kind: invoker.KindRaw, Raw: raw}
	if !allow {
		ev = invoker.Event{Kind: invoker.KindWarning, Raw: raw,
			Text: fmt.Sprintf("%s asked to run %q (%s); declined under permission %s", p.cfg.name(), call.Title, call.Kind, p.perm)}
	}
	st := p.turnStep(ev)
	st.Write = [][]byte{result(m.ID, map[string]any{"outcome": outcome})}
	return st
}

// approve decides a request for permission: Config.Approve, else Allowed.
// A panic in Approve declines.
func (p *Protocol) approve(call ToolCall) (ok bool) {
	if p.cfg.Approve == nil {
		return Allowed(p.perm, call.Kind)
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return p.cfg.Approve(p.perm, call)
}
