package fakemodel_test

import (
	"encoding/json"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
)

// CallTool calls the named tool with the given arguments in each API's
// shape, as Claude Code's StructuredOutput tool is called under
// --json-schema.
func TestCallToolArguments(t *testing.T) {
	input := map[string]any{"name": "Ada"}
	const args = `{"name":"Ada"}` // input as JSON
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.CallTool("StructuredOutput", input), fakemodel.CallTool("StructuredOutput", input),
		fakemodel.CallTool("report", input), fakemodel.CallTool("report", nil))

	t.Run("anthropic stream", func(t *testing.T) {
		var name, argsJSON, stop string
		for _, e := range readSSE(t, post(t, c, srv.AnthropicBaseURL()+"/v1/messages", anthropicReq(true))) {
			switch e.name {
			case "content_block_start":
				name = str(e.data, "content_block", "name")
			case "content_block_delta":
				argsJSON += str(e.data, "delta", "partial_json")
			case "message_delta":
				stop = str(e.data, "delta", "stop_reason")
			}
		}
		if name != "StructuredOutput" || argsJSON != args || stop != "tool_use" {
			t.Errorf("tool_use %s(%s), stop %s; want StructuredOutput(%s), tool_use", name, argsJSON, stop, args)
		}
	})
	t.Run("anthropic JSON", func(t *testing.T) {
		var msg map[string]any
		if err := json.NewDecoder(post(t, c, srv.AnthropicBaseURL()+"/v1/messages", anthropicReq(false)).Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if got := get(msg, "content", 0); str(got, "type") != "tool_use" || str(got, "name") != "StructuredOutput" || str(got, "input", "name") != "Ada" {
			t.Errorf("content = %v, want one tool_use StructuredOutput with the input", msg["content"])
		}
	})
	t.Run("openai", func(t *testing.T) {
		evs := readSSE(t, post(t, c, srv.OpenAIBaseURL()+"/responses", openaiReq()))
		item := get(evs[len(evs)-1].data, "response", "output", 0)
		if str(item, "type") != "function_call" || str(item, "name") != "report" || str(item, "arguments") != args {
			t.Errorf("output = %v, want function_call report with the arguments", item)
		}
	})
	t.Run("gemini, no arguments", func(t *testing.T) {
		evs := readSSE(t, post(t, c, geminiStream(srv), geminiReq()))
		call := get(evs[len(evs)-1].data, "candidates", 0, "content", "parts", 0, "functionCall")
		if args, ok := get(call, "args").(map[string]any); str(call, "name") != "report" || !ok || len(args) != 0 {
			t.Errorf("functionCall = %v, want report with {} as args", call)
		}
	})
}
