package fakemodel

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
)

// anthropicRequest is the part of a Messages request the fake looks at.
type anthropicRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []struct {
		Content json.RawMessage `json:"content"` // a string or blocks
	} `json:"messages"`
}

// anthropicAPI is the dialect of the Anthropic Messages API.
var anthropicAPI = dialect[anthropicRequest]{
	fail: func(w http.ResponseWriter, t Turn) { anthropicError(w, t.Status, t.Message) },
	// Claude Code's side requests (session title, quota check) carry no
	// tools; a model turn of the agent always offers some.
	side:       func(body anthropicRequest) bool { return len(body.Tools) == 0 },
	toolResult: anthropicToolResult,
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request, req Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(req.Path, "/count_tokens") {
		s.record(req)
		writeJSON(w, http.StatusOK, obj{"input_tokens": inputTokens})
		return
	}
	body, t, ok := anthropicAPI.turn(s, w, r, req)
	if !ok {
		return
	}
	text := t.Text
	msgID := s.id("msg")
	call, isCall := t.toolCall(Anthropic)
	var toolID string
	stop := "end_turn"
	if isCall {
		toolID = s.id("toolu")
		stop = "tool_use"
	}
	usage := obj{"input_tokens": inputTokens, "output_tokens": outputTokens}
	model := cmp.Or(body.Model, "claude-fake")

	if !body.Stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.stall(r)
			return
		}
		var content []obj
		if text != "" || !isCall {
			content = append(content, obj{"type": "text", "text": text})
		}
		if isCall {
			content = append(content, obj{"type": "tool_use", "id": toolID, "name": call.Name, "input": call.Input})
		}
		writeJSON(w, http.StatusOK, obj{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}

	e := startSSE(w)
	e.event("message_start", obj{"type": "message_start", "message": obj{
		"id": msgID, "type": "message", "role": "assistant", "model": model,
		"content": []obj{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": inputTokens, "output_tokens": 1},
	}})
	if t.Stall && text == "" {
		s.stall(r)
		return
	}
	index := 0
	if text != "" || !isCall {
		e.event("content_block_start", obj{"type": "content_block_start", "index": index,
			"content_block": obj{"type": "text", "text": ""}})
		for i, d := range deltas(text) {
			if !s.pace(r, t, i) {
				return
			}
			e.event("content_block_delta", obj{"type": "content_block_delta", "index": index,
				"delta": obj{"type": "text_delta", "text": d}})
		}
		if t.Stall {
			s.stall(r)
			return
		}
		e.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	if isCall {
		input, _ := json.Marshal(call.Input)
		half := len(input) / 2 // the input arrives in two pieces, as from a real model
		e.event("content_block_start", obj{"type": "content_block_start", "index": index,
			"content_block": obj{"type": "tool_use", "id": toolID, "name": call.Name, "input": obj{}}})
		for _, part := range []string{string(input[:half]), string(input[half:])} {
			e.event("content_block_delta", obj{"type": "content_block_delta", "index": index,
				"delta": obj{"type": "input_json_delta", "partial_json": part}})
		}
		e.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
	}
	e.event("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": outputTokens}})
	e.event("message_stop", obj{"type": "message_stop"})
}

// anthropicError answers with the Messages API's error JSON. The
// x-should-retry header tells the Anthropic SDK not to retry even when the
// CLI's retries were left on, unless the turn's Header set it (a test of
// the CLI's retries sets it to "true").
func anthropicError(w http.ResponseWriter, status int, message string) {
	typ := "api_error"
	switch status {
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case 529:
		typ = "overloaded_error"
	}
	if w.Header().Get("x-should-retry") == "" {
		w.Header().Set("x-should-retry", "false")
	}
	w.Header().Set("request-id", "req_fakemodel")
	writeJSON(w, status, obj{"type": "error", "error": obj{"type": typ, "message": message}})
}

// anthropicToolResult returns the text of the last tool_result block in the
// request, or "".
func anthropicToolResult(body anthropicRequest) string {
	for i := len(body.Messages) - 1; i >= 0; i-- {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(body.Messages[i].Content, &blocks) != nil {
			continue // a plain string
		}
		for j := len(blocks) - 1; j >= 0; j-- {
			if blocks[j].Type == "tool_result" {
				return textOf(blocks[j].Content)
			}
		}
	}
	return ""
}

// textOf returns a JSON string's value, or the concatenated "text" fields of
// an array of content parts, or the raw JSON.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}
