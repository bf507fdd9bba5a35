package fakemodel

import (
	"cmp"
	"encoding/json"
	"net/http"
	"time"
)

// Chat is the OpenAI Chat Completions API (POST {ChatBaseURL}/chat/completions),
// spoken by the agents built on OpenAI-compatible providers: opencode,
// Qwen Code.
const Chat API = "chat"

// ChatBaseURL returns the base URL of an OpenAI-compatible provider (it ends
// in /v1; clients append /chat/completions).
func (s *Server) ChatBaseURL() string { return s.ts.URL + "/v1" }

// chatRequest is the part of a Chat Completions request the fake looks at.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []struct {
		Function struct {
			Name       string `json:"name"`
			Parameters struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or content parts
	} `json:"messages"`
}

// chatShellTools are the shell tools of the agents that speak Chat
// Completions, in order of preference: opencode's bash, Qwen Code's
// run_shell_command.
var chatShellTools = []string{"bash", "run_shell_command", "shell"}

// chatToolCall returns the tool call that ends t. A Shell turn calls the
// shell tool the request declares (see chatShellTools) with {"command"}, and
// a "description" when the tool's schema has one; with no such tool
// declared it calls run_shell_command.
func (t Turn) chatToolCall(body chatRequest) (Call, bool) {
	c, ok := t.toolCall(Chat)
	if !ok || t.Shell == "" {
		return c, ok
	}
	c = Call{Name: "run_shell_command", Input: obj{"command": t.Shell, "description": "Run a shell command"}}
	for _, name := range chatShellTools {
		for _, tool := range body.Tools {
			if tool.Function.Name != name {
				continue
			}
			c = Call{Name: name, Input: obj{"command": t.Shell}}
			if _, ok := tool.Function.Parameters.Properties["description"]; ok {
				c.Input["description"] = "Run a shell command"
			}
			return c, true
		}
	}
	return c, true
}

// chatAPI is the dialect of the Chat Completions API.
var chatAPI = dialect[chatRequest]{
	fail: openaiFail,
	// opencode retries a 500 five times with backoff (2 s, doubling)
	// unless the answer names its own delay: the script's end fails in
	// milliseconds instead of a minute.
	endHeader: http.Header{"retry-after-ms": {"1"}},
	// Side requests (opencode's session title) carry no tools; a model
	// turn of the agent always offers some.
	side:       func(body chatRequest) bool { return len(body.Tools) == 0 },
	toolResult: chatToolResult,
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, req Request) {
	body, t, ok := chatAPI.turn(s, w, r, req)
	if !ok {
		return
	}
	text := t.Text
	model := cmp.Or(body.Model, "gpt-fake")
	id := s.id("chatcmpl")
	created := time.Now().Unix()
	call, isCall := t.chatToolCall(body)
	var callID, args string
	finish := "stop"
	if isCall {
		callID = s.id("call")
		b, _ := json.Marshal(call.Input)
		args = string(b)
		finish = "tool_calls"
	}
	usage := obj{"prompt_tokens": inputTokens, "completion_tokens": outputTokens,
		"total_tokens": inputTokens + outputTokens}

	if !body.Stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.stall(r)
			return
		}
		msg := obj{"role": "assistant", "content": nil}
		if text != "" || !isCall {
			msg["content"] = text
		}
		if isCall {
			msg["tool_calls"] = []obj{{"id": callID, "type": "function",
				"function": obj{"name": call.Name, "arguments": args}}}
		}
		writeJSON(w, http.StatusOK, obj{"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []obj{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}

	e := startSSE(w)
	chunk := func(delta obj, finish any) {
		e.event("", obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []obj{{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(obj{"role": "assistant", "content": ""}, nil)
	for i, d := range deltas(text) {
		if !s.pace(r, t, i) {
			return
		}
		chunk(obj{"content": d}, nil)
	}
	if t.Stall {
		s.stall(r)
		return
	}
	if isCall {
		// The arguments arrive in two pieces, as from a real model.
		half := len(args) / 2
		chunk(obj{"tool_calls": []obj{{"index": 0, "id": callID, "type": "function",
			"function": obj{"name": call.Name, "arguments": args[:half]}}}}, nil)
		chunk(obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": args[half:]}}}}, nil)
	}
	chunk(obj{}, finish)
	if body.StreamOptions.IncludeUsage {
		e.event("", obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []obj{}, "usage": usage})
	}
	e.done()
}

// done writes the stream's closing "data: [DONE]" line.
func (e *sse) done() {
	_, _ = e.w.Write([]byte("data: [DONE]\n\n"))
	e.flush()
}

// chatToolResult returns the content of the last "tool" message in the
// request, or "".
func chatToolResult(body chatRequest) string {
	for i := len(body.Messages) - 1; i >= 0; i-- {
		if body.Messages[i].Role == "tool" {
			return textOf(body.Messages[i].Content)
		}
	}
	return ""
}
