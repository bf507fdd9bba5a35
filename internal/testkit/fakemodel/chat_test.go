package fakemodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
)

// tool declares a function tool in Chat Completions' shape, with the given
// parameter names.
func tool(name string, params ...string) map[string]any {
	props := map[string]any{}
	for _, p := range params {
		props[p] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "function", "function": map[string]any{"name": name,
		"parameters": map[string]any{"type": "object", "properties": props}}}
}

// chatReq is a Chat Completions request offering tools (opencode's bash
// when none are given) with messages (one user message when none are
// given).
func chatReq(stream bool, tools []any, messages ...any) map[string]any {
	if tools == nil {
		tools = []any{tool("bash", "command", "timeout", "workdir"), tool("read", "filePath")}
	}
	if len(messages) == 0 {
		messages = []any{map[string]any{"role": "user", "content": "say hi"}}
	}
	return map[string]any{"model": "fake-model", "stream": stream, "stream_options": map[string]any{"include_usage": true},
		"tools": tools, "tool_choice": "auto", "messages": messages}
}

func chatURL(srv *fakemodel.Server) string { return srv.ChatBaseURL() + "/chat/completions" }

// A chatStream is a streamed answer put back together.
type chatStream struct {
	chunks []map[string]any // every chunk but [DONE], in order
	text   string           // the content deltas, concatenated
	deltas int              // how many chunks carried content
	name   string           // the tool call's function name
	callID string
	args   string // the tool call's argument pieces, concatenated
	finish string // the finish_reason of the choice
	usage  map[string]any
	done   bool // the stream ended with data: [DONE]
}

// readChat parses a whole Chat Completions stream: data-only events, each
// a chat.completion.chunk, ending with "data: [DONE]".
func readChat(t *testing.T, resp *http.Response) chatStream {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status = %d, want 200; body %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	var s chatStream
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q in a data-only stream", line)
		}
		if s.done {
			t.Fatalf("%q after data: [DONE]", line)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("data %q: %v", data, err)
		}
		if str(c, "object") != "chat.completion.chunk" || str(c, "id") == "" {
			t.Errorf("chunk %v is not a chat.completion.chunk with an id", c)
		}
		s.chunks = append(s.chunks, c)
		if u, ok := c["usage"].(map[string]any); ok {
			s.usage = u
		}
		choice := get(c, "choices", 0)
		if d := str(choice, "delta", "content"); d != "" {
			s.text += d
			s.deltas++
		}
		if f := str(choice, "finish_reason"); f != "" {
			s.finish = f
		}
		if call := get(choice, "delta", "tool_calls", 0); call != nil {
			if get(call, "index") != float64(0) {
				t.Errorf("tool call delta %v has no index 0", call)
			}
			if n := str(call, "function", "name"); n != "" {
				s.name, s.callID = n, str(call, "id")
			}
			s.args += str(call, "function", "arguments")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChatStreams(t *testing.T) {
	bashInput := func(cmd string) string { b, _ := json.Marshal(map[string]any{"command": cmd}); return string(b) }
	for _, tc := range []struct {
		name  string
		turn  fakemodel.Turn
		tools []any
		// want
		text, call, args, finish string
	}{
		{name: "answer in word deltas", turn: fakemodel.Answer("hi there friend"),
			text: "hi there friend", finish: "stop"},
		{name: "empty answer", turn: fakemodel.Answer(""), finish: "stop"},
		{name: "opencode's bash", turn: fakemodel.Shell("touch made.txt"),
			call: "bash", args: bashInput("touch made.txt"), finish: "tool_calls"},
		{name: "Qwen Code's run_shell_command, with a description",
			turn:  fakemodel.Shell("ls"),
			tools: []any{tool("read_file", "path"), tool("run_shell_command", "command", "description", "is_background")},
			call:  "run_shell_command", args: `{"command":"ls","description":"Run a shell command"}`, finish: "tool_calls"},
		{name: "no shell declared", turn: fakemodel.Shell("ls"), tools: []any{tool("read", "filePath")},
			call: "run_shell_command", args: `{"command":"ls","description":"Run a shell command"}`, finish: "tool_calls"},
		{name: "text then a named tool", turn: fakemodel.Turn{Text: "let me look", Call: &fakemodel.Call{Name: "mcp_clinvoke_codex",
			Input: map[string]any{"prompt": "review"}}},
			text: "let me look", call: "mcp_clinvoke_codex", args: `{"prompt":"review"}`, finish: "tool_calls"},
		{name: "a named tool without input", turn: fakemodel.CallTool("todowrite", nil),
			call: "todowrite", args: `{}`, finish: "tool_calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := newServer(t)
			srv.Enqueue(tc.turn)
			s := readChat(t, post(t, c, chatURL(srv), chatReq(true, tc.tools)))
			if !s.done {
				t.Errorf("stream did not end with data: [DONE]")
			}
			if s.text != tc.text || s.finish != tc.finish {
				t.Errorf("text %q, finish_reason %q; want %q, %q", s.text, s.finish, tc.text, tc.finish)
			}
			if want := len(strings.Fields(tc.text)); s.deltas != want {
				t.Errorf("%d content deltas, want one per word (%d)", s.deltas, want)
			}
			if s.name != tc.call || s.args != tc.args {
				t.Errorf("tool call %s(%s), want %s(%s)", s.name, s.args, tc.call, tc.args)
			}
			if tc.call != "" && s.callID == "" {
				t.Errorf("tool call has no id")
			}
			if get(s.usage, "total_tokens") == nil || get(s.usage, "prompt_tokens") == nil {
				t.Errorf("usage = %v, want prompt and total tokens (stream_options.include_usage)", s.usage)
			}
			if str(s.chunks[0], "model") != "fake-model" || str(s.chunks[0], "choices", 0, "delta", "role") != "assistant" {
				t.Errorf("first chunk = %v, want the request's model and the assistant role", s.chunks[0])
			}
			if r := srv.Scripted(); len(r) != 1 || r[0].API != fakemodel.Chat {
				t.Errorf("scripted requests = %v, want one of API chat", r)
			}
		})
	}
}

// TestChatToolResult runs a tool round trip: the tool's output in a "tool"
// message, as a string or as content parts, comes back in the answer.
func TestChatToolResult(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content any
	}{
		{"string", "made\n"},
		{"parts", []any{map[string]any{"type": "text", "text": "ma"}, map[string]any{"type": "text", "text": "de\n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := newServer(t)
			srv.Enqueue(fakemodel.Shell("echo made"), fakemodel.EchoToolResult("done: "))
			first := readChat(t, post(t, c, chatURL(srv), chatReq(true, nil)))
			call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": first.callID, "type": "function", "function": map[string]any{"name": first.name, "arguments": first.args}}}}
			result := map[string]any{"role": "tool", "tool_call_id": first.callID, "content": tc.content}
			s := readChat(t, post(t, c, chatURL(srv), chatReq(true, nil,
				map[string]any{"role": "user", "content": "run it"}, call, result)))
			if s.text != "done: made\n" || s.finish != "stop" {
				t.Errorf("answer %q (%s), want %q (stop)", s.text, s.finish, "done: made\n")
			}
		})
	}
}

func TestChatNonStreaming(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("plain"), fakemodel.Shell("ls"))
	for _, want := range []struct{ content, call, finish string }{{"plain", "", "stop"}, {"", "bash", "tool_calls"}} {
		var m map[string]any
		if err := json.NewDecoder(post(t, c, chatURL(srv), chatReq(false, nil)).Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		msg := get(m, "choices", 0, "message")
		if str(m, "object") != "chat.completion" || str(msg, "role") != "assistant" || str(msg, "content") != want.content ||
			str(msg, "tool_calls", 0, "function", "name") != want.call || str(m, "choices", 0, "finish_reason") != want.finish ||
			get(m, "usage", "total_tokens") == nil {
			t.Errorf("completion = %v, want content %q, tool call %q, finish_reason %s and usage", m, want.content, want.call, want.finish)
		}
		if want.call != "" && (get(msg, "content") != nil || str(msg, "tool_calls", 0, "function", "arguments") != `{"command":"ls"}`) {
			t.Errorf("tool call message = %v, want null content and the command as arguments", msg)
		}
	}
}

// TestChatSideRequests checks that a request offering no tools (opencode's
// session title) is answered without taking a turn.
func TestChatSideRequests(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("kept"))
	s := readChat(t, post(t, c, chatURL(srv), chatReq(true, []any{})))
	if s.text == "" || s.finish != "stop" {
		t.Errorf("side answer %q (%s), want some text and stop", s.text, s.finish)
	}
	if srv.Pending() != 1 || len(srv.Scripted()) != 0 {
		t.Errorf("the side request took a turn (pending %d)", srv.Pending())
	}
	if r := srv.Requests(); len(r) != 1 || r[0].API != fakemodel.Chat || r[0].Path != "/v1/chat/completions" {
		t.Errorf("requests = %v, want one chat request", r)
	}
}

func TestChatErrors(t *testing.T) {
	for _, tc := range []struct {
		status     int
		typ, code  string
		retryAfter string
	}{
		{401, "invalid_request_error", "invalid_api_key", ""},
		{429, "requests", "rate_limit_exceeded", "7"},
		{500, "server_error", "server_error", ""},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv, c := newServer(t)
			turn := fakemodel.Fail(tc.status, "boom")
			if tc.retryAfter != "" {
				turn.Header = http.Header{"Retry-After": {tc.retryAfter}}
			}
			srv.Enqueue(turn)
			resp := post(t, c, chatURL(srv), chatReq(true, nil))
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || str(m, "error", "message") != "boom" ||
				str(m, "error", "type") != tc.typ || str(m, "error", "code") != tc.code {
				t.Errorf("got %d %v, want %d with message boom, type %s, code %s", resp.StatusCode, m, tc.status, tc.typ, tc.code)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
		})
	}
	t.Run("empty script", func(t *testing.T) {
		srv, c := newServer(t)
		resp := post(t, c, chatURL(srv), chatReq(true, nil))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "no scripted turn left") {
			t.Errorf("got %d %s, want 500 naming the empty script", resp.StatusCode, b)
		}
		if got := resp.Header.Get("retry-after-ms"); got != "1" {
			t.Errorf("retry-after-ms = %q, want 1 (a retrying client fails fast)", got)
		}
	})
	t.Run("GET", func(t *testing.T) {
		srv, c := newServer(t)
		resp, err := c.Get(chatURL(srv))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("status = %d, want 405", resp.StatusCode)
		}
	})
}

// TestChatPaceAndHeader checks that a paced answer spreads its deltas over
// time and that a turn's headers reach the client.
func TestChatPaceAndHeader(t *testing.T) {
	srv, c := newServer(t)
	const pace = 40 * time.Millisecond
	srv.Enqueue(fakemodel.Turn{Text: "one two three four", Pace: pace, Header: http.Header{"X-Test": {"paced"}}})
	start := time.Now()
	resp := post(t, c, chatURL(srv), chatReq(true, nil))
	if got := resp.Header.Get("X-Test"); got != "paced" {
		t.Errorf("X-Test header = %q, want paced", got)
	}
	if s := readChat(t, resp); s.text != "one two three four" {
		t.Errorf("text = %q", s.text)
	}
	// Three pauses between four deltas: a lower bound.
	if took := time.Since(start); took < 3*pace {
		t.Errorf("a paced answer of 4 deltas took %v, want at least %v", took, 3*pace)
	}
}

// TestChatStall checks that a stalled answer sends its partial text, then
// nothing, and that its handler returns once the client goes away.
func TestChatStall(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Stall("partial "))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, _ := json.Marshal(chatReq(true, nil))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, chatURL(srv), strings.NewReader(string(b)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(testenv.Timeout(time.Minute))
	for seen := false; !seen; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stalled stream ended before the partial text")
			}
			seen = strings.Contains(l, `"content":"partial "`)
		case <-timeout:
			t.Fatal("no partial text from a stalled answer")
		}
	}
	quiet := time.After(200 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case l, ok := <-lines:
			if !ok || l != "" {
				t.Fatalf("stalled stream went on: %q (open %v)", l, ok)
			}
		case <-quiet:
			// A negative check: a slow machine can only make it pass.
			waiting = false
		}
	}
	cancel()
	for range lines { // drains until the body fails
	}
	if srv.Pending() != 0 {
		t.Errorf("the stall did not take its turn")
	}
}
