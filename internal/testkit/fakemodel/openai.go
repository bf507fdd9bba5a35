package fakemodel

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
)

// openaiRequest is the part of a Responses request the fake looks at.
type openaiRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Input  []struct {
		Type   string          `json:"type"`
		Output json.RawMessage `json:"output"`
	} `json:"input"`
}

// openaiAPI is the dialect of the OpenAI Responses API, whose requests are
// all model turns.
var openaiAPI = dialect[openaiRequest]{fail: openaiFail, toolResult: openaiToolResult}

func (s *Server) openai(w http.ResponseWriter, r *http.Request, req Request) {
	// Codex first tries a WebSocket with some providers; 426 makes it fall
	// back to HTTP streaming.
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.record(req)
		openaiError(w, http.StatusUpgradeRequired, "fakemodel: WebSocket is not supported, use HTTP")
		return
	}
	body, t, ok := openaiAPI.turn(s, w, r, req)
	if !ok {
		return
	}
	text := t.Text
	model := cmp.Or(body.Model, "gpt-fake")
	respID := s.id("resp")
	var output []obj
	var msgID string
	call, isCall := t.toolCall(OpenAI)
	if text != "" || !isCall {
		msgID = s.id("msg")
		output = append(output, obj{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []obj{{"type": "output_text", "text": text, "annotations": []obj{}}}})
	}
	switch {
	case isCall && call.Freeform != "":
		output = append(output, obj{"type": "custom_tool_call", "id": s.id("ctc"), "call_id": s.id("call"),
			"name": call.Name, "input": call.Freeform, "status": "completed"})
	case isCall:
		args, _ := json.Marshal(call.Input)
		item := obj{"type": "function_call", "id": s.id("fc"), "call_id": s.id("call"),
			"name": call.Name, "arguments": string(args), "status": "completed"}
		if call.Namespace != "" {
			item["namespace"] = call.Namespace
		}
		output = append(output, item)
	}
	response := obj{"id": respID, "object": "response", "model": model, "status": "completed", "output": output,
		"usage": obj{"input_tokens": inputTokens, "input_tokens_details": obj{"cached_tokens": 0},
			"output_tokens": outputTokens, "output_tokens_details": obj{"reasoning_tokens": 0},
			"total_tokens": inputTokens + outputTokens}}

	if !body.Stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.stall(r)
			return
		}
		writeJSON(w, http.StatusOK, response)
		return
	}

	e := startSSE(w)
	seq := 0
	ev := func(typ string, fields obj) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		e.event(typ, fields)
	}
	ev("response.created", obj{"response": obj{"id": respID, "object": "response", "model": model,
		"status": "in_progress", "output": []obj{}}})
	if t.Stall && text == "" {
		s.stall(r)
		return
	}
	for i, item := range output {
		if item["type"] == "message" {
			ev("response.output_item.added", obj{"output_index": i, "item": obj{"type": "message", "id": msgID,
				"role": "assistant", "status": "in_progress", "content": []obj{}}})
			ev("response.content_part.added", obj{"item_id": msgID, "output_index": i, "content_index": 0,
				"part": obj{"type": "output_text", "text": "", "annotations": []obj{}}})
			for i, d := range deltas(text) {
				if !s.pace(r, t, i) {
					return
				}
				ev("response.output_text.delta", obj{"item_id": msgID, "output_index": i, "content_index": 0, "delta": d})
			}
			if t.Stall {
				s.stall(r)
				return
			}
			ev("response.output_text.done", obj{"item_id": msgID, "output_index": i, "content_index": 0, "text": text})
			ev("response.content_part.done", obj{"item_id": msgID, "output_index": i, "content_index": 0,
				"part": obj{"type": "output_text", "text": text, "annotations": []obj{}}})
		}
		ev("response.output_item.done", obj{"output_index": i, "item": item})
	}
	ev("response.completed", obj{"response": response})
}

// openaiError answers with the OpenAI error JSON.
func openaiError(w http.ResponseWriter, status int, message string) {
	typ, code := "server_error", "server_error"
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status < 500:
		typ, code = "invalid_request_error", "invalid_request"
	}
	writeJSON(w, status, obj{"error": obj{"message": message, "type": typ, "code": code, "param": nil}})
}

// openaiFail answers t's HTTP error with openaiError.
func openaiFail(w http.ResponseWriter, t Turn) { openaiError(w, t.Status, t.Message) }

// openaiToolResult returns the output of the last function_call_output
// (or custom_tool_call_output) item in the request, or "".
func openaiToolResult(body openaiRequest) string {
	for i := len(body.Input) - 1; i >= 0; i-- {
		if t := body.Input[i].Type; t == "function_call_output" || t == "custom_tool_call_output" {
			return textOf(body.Input[i].Output)
		}
	}
	return ""
}
