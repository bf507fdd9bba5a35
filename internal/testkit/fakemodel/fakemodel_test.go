package fakemodel_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newServer starts a Server and a client whose idle connections are closed
// when the test ends (before the server, as Cleanup runs in reverse), so
// goleak sees no transport goroutines.
func newServer(t *testing.T) (*fakemodel.Server, *http.Client) {
	t.Helper()
	srv := fakemodel.New(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr, Timeout: testenv.Timeout(time.Minute)}
}

func post(t *testing.T, c *http.Client, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type event struct {
	name string // "" for a data-only event
	data map[string]any
}

// readSSE parses a whole event stream, failing on anything but "event:" and
// "data:" lines separated by blank lines.
func readSSE(t *testing.T, resp *http.Response) []event {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status = %d, want 200; body %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	var evs []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == nil {
				t.Fatalf("event %q without data", cur.name)
			}
			evs = append(evs, cur)
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.name != "" || cur.data != nil {
		t.Fatalf("stream ended inside an event")
	}
	return evs
}

func names(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// get walks v along keys (string for maps, int for slices).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := get(v, path...).(string); return s }

var bashTool = []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}}

func anthropicReq(stream bool, messages ...any) map[string]any {
	if len(messages) == 0 {
		messages = []any{map[string]any{"role": "user", "content": "say hi"}}
	}
	return map[string]any{"model": "claude-test", "stream": stream, "tools": bashTool, "messages": messages}
}

func TestAnthropicStreamsAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("hi there friend"))
	evs := readSSE(t, post(t, c, srv.AnthropicBaseURL()+"/v1/messages?beta=true", anthropicReq(true)))

	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if got := names(evs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v, want %v", got, want)
	}
	var text strings.Builder
	for _, e := range evs {
		if str(e.data, "type") != e.name {
			t.Errorf("event %q has data type %q", e.name, str(e.data, "type"))
		}
		if e.name == "content_block_delta" {
			text.WriteString(str(e.data, "delta", "text"))
		}
	}
	if text.String() != "hi there friend" {
		t.Errorf("streamed text = %q, want %q", text.String(), "hi there friend")
	}
	if got := str(evs[0].data, "message", "model"); got != "claude-test" {
		t.Errorf("model = %q, want the request's", got)
	}
	if got := str(evs[6].data, "delta", "stop_reason"); got != "end_turn" {
		t.Errorf("stop_reason = %q, want end_turn", got)
	}
}

func TestAnthropicToolCallThenAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Shell("echo hello"), fakemodel.EchoToolResult("done: "))
	url := srv.AnthropicBaseURL() + "/v1/messages"

	evs := readSSE(t, post(t, c, url, anthropicReq(true)))
	var input, id string
	for _, e := range evs {
		switch e.name {
		case "content_block_start":
			if str(e.data, "content_block", "type") != "tool_use" || str(e.data, "content_block", "name") != "Bash" {
				t.Errorf("content_block = %v, want tool_use Bash", e.data["content_block"])
			}
			id = str(e.data, "content_block", "id")
		case "content_block_delta":
			input += str(e.data, "delta", "partial_json")
		case "message_delta":
			if got := str(e.data, "delta", "stop_reason"); got != "tool_use" {
				t.Errorf("stop_reason = %q, want tool_use", got)
			}
		}
	}
	var in struct{ Command string }
	if err := json.Unmarshal([]byte(input), &in); err != nil || in.Command != "echo hello" {
		t.Fatalf("tool input = %q (%v), want command echo hello", input, err)
	}

	result := map[string]any{"role": "user", "content": []any{map[string]any{
		"type": "tool_result", "tool_use_id": id, "content": []any{map[string]any{"type": "text", "text": "hello"}}}}}
	evs = readSSE(t, post(t, c, url, anthropicReq(true, map[string]any{"role": "user", "content": "run it"}, result)))
	var text string
	for _, e := range evs {
		text += str(e.data, "delta", "text")
	}
	if text != "done: hello" {
		t.Errorf("answer = %q, want %q", text, "done: hello")
	}
	if n := len(srv.Scripted()); n != 2 {
		t.Errorf("scripted requests = %d, want 2", n)
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("plain"), fakemodel.Shell("ls"))
	url := srv.AnthropicBaseURL() + "/v1/messages"
	for _, want := range []struct{ typ, stop string }{{"text", "end_turn"}, {"tool_use", "tool_use"}} {
		resp := post(t, c, url, anthropicReq(false))
		var msg map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if str(msg, "type") != "message" || str(msg, "content", 0, "type") != want.typ || str(msg, "stop_reason") != want.stop {
			t.Errorf("message = %v, want one %s block and stop_reason %s", msg, want.typ, want.stop)
		}
	}
}

func TestSideRequestsKeepTheScript(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("kept"))

	req, _ := http.NewRequest(http.MethodHead, srv.URL()+"/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD / status = %d, want 200", resp.StatusCode)
	}
	// A title request carries no tools.
	readSSE(t, post(t, c, srv.AnthropicBaseURL()+"/v1/messages", map[string]any{"stream": true, "tools": []any{},
		"messages": []any{map[string]any{"role": "user", "content": "title?"}}}))
	post(t, c, srv.AnthropicBaseURL()+"/v1/messages/count_tokens", map[string]any{"messages": []any{}})

	resp = post(t, c, srv.GeminiBaseURL()+"/v1beta/models/auto-classifier:generateContent", map[string]any{"contents": []any{}})
	var gen map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&gen); err != nil {
		t.Fatal(err)
	}
	var routing struct {
		Reasoning string `json:"complexity_reasoning"`
		Score     int    `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(str(gen, "candidates", 0, "content", "parts", 0, "text")), &routing); err != nil ||
		routing.Score < 1 || routing.Score > 100 || routing.Reasoning == "" {
		t.Errorf("routing answer = %v (%v), want complexity_reasoning and a score in 1..100", gen, err)
	}

	if n := srv.Pending(); n != 1 {
		t.Errorf("Pending() = %d after side requests, want 1", n)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("recorded %d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.Scripted {
			t.Errorf("%s %s recorded as scripted", r.Method, r.Path)
		}
	}
	if reqs[0].Method != http.MethodHead || reqs[0].API != fakemodel.Anthropic {
		t.Errorf("first request = %s %s (%s), want HEAD / (anthropic)", reqs[0].Method, reqs[0].Path, reqs[0].API)
	}
	if reqs[3].API != fakemodel.Gemini {
		t.Errorf("routing request API = %q, want gemini", reqs[3].API)
	}
}

func openaiReq(input ...any) map[string]any {
	if len(input) == 0 {
		input = []any{map[string]any{"type": "message", "role": "user", "content": "say hi"}}
	}
	return map[string]any{"model": "gpt-test", "stream": true, "input": input}
}

func TestOpenAIStreamsAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("hi there friend"))
	evs := readSSE(t, post(t, c, srv.OpenAIBaseURL()+"/responses", openaiReq()))

	var text string
	done := -1
	for i, e := range evs {
		if e.name == "" || str(e.data, "type") != e.name {
			t.Errorf("event %q has data type %q, want the same", e.name, str(e.data, "type"))
		}
		switch e.name {
		case "response.output_text.delta":
			text += str(e.data, "delta")
		case "response.output_item.done":
			done = i
			if str(e.data, "item", "type") != "message" || str(e.data, "item", "content", 0, "text") != "hi there friend" {
				t.Errorf("output_item.done item = %v", e.data["item"])
			}
		}
	}
	if text != "hi there friend" {
		t.Errorf("deltas = %q, want %q", text, "hi there friend")
	}
	last := evs[len(evs)-1]
	if done < 0 || last.name != "response.completed" {
		t.Fatalf("events = %v, want response.output_item.done and a final response.completed", names(evs))
	}
	if str(last.data, "response", "status") != "completed" || get(last.data, "response", "usage", "total_tokens") == nil ||
		str(last.data, "response", "output", 0, "content", 0, "text") != "hi there friend" {
		t.Errorf("response.completed = %v", last.data)
	}
}

func TestOpenAIToolCallThenAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Shell("echo hello"), fakemodel.EchoToolResult("done: "))
	url := srv.OpenAIBaseURL() + "/responses"

	evs := readSSE(t, post(t, c, url, openaiReq()))
	var call map[string]any
	for _, e := range evs {
		if e.name == "response.output_item.done" {
			call, _ = e.data["item"].(map[string]any)
		}
	}
	if str(call, "type") != "function_call" || str(call, "name") != "exec_command" || str(call, "call_id") == "" {
		t.Fatalf("item = %v, want function_call exec_command with a call_id", call)
	}
	var args struct{ Cmd string }
	if err := json.Unmarshal([]byte(str(call, "arguments")), &args); err != nil || args.Cmd != "echo hello" {
		t.Fatalf("arguments = %q (%v), want cmd echo hello", str(call, "arguments"), err)
	}
	if names(evs)[len(evs)-1] != "response.completed" {
		t.Errorf("last event = %q, want response.completed", names(evs)[len(evs)-1])
	}

	evs = readSSE(t, post(t, c, url, openaiReq(
		map[string]any{"type": "message", "role": "user", "content": "run it"},
		call,
		map[string]any{"type": "function_call_output", "call_id": str(call, "call_id"), "output": "hello\n"})))
	last := evs[len(evs)-1]
	if got := str(last.data, "response", "output", 0, "content", 0, "text"); got != "done: hello\n" {
		t.Errorf("answer = %q, want %q", got, "done: hello\n")
	}
}

func TestOpenAIRefusesWebSocket(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("kept"))
	req, _ := http.NewRequest(http.MethodGet, srv.OpenAIBaseURL()+"/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("status = %d, want 426", resp.StatusCode)
	}
	if srv.Pending() != 1 {
		t.Errorf("the refused upgrade took a turn")
	}
}

func geminiReq(contents ...any) map[string]any {
	if len(contents) == 0 {
		contents = []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "say hi"}}}}
	}
	return map[string]any{"contents": contents}
}

func geminiStream(srv *fakemodel.Server) string {
	return srv.GeminiBaseURL() + "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
}

func TestGeminiStreamsAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("hi there friend"))
	evs := readSSE(t, post(t, c, geminiStream(srv), geminiReq()))
	if len(evs) < 2 {
		t.Fatalf("got %d chunks, want several", len(evs))
	}
	var text string
	for i, e := range evs {
		if e.name != "" {
			t.Errorf("chunk %d has event name %q, want data-only", i, e.name)
		}
		text += str(e.data, "candidates", 0, "content", "parts", 0, "text")
		reason := str(e.data, "candidates", 0, "finishReason")
		if last := i == len(evs)-1; last != (reason == "STOP") {
			t.Errorf("chunk %d finishReason = %q (last: %v)", i, reason, last)
		}
	}
	if text != "hi there friend" {
		t.Errorf("text = %q, want %q", text, "hi there friend")
	}
	if get(evs[len(evs)-1].data, "usageMetadata", "totalTokenCount") == nil {
		t.Errorf("last chunk has no usageMetadata")
	}
}

func TestGeminiToolCallThenAnswer(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Shell("echo hello"), fakemodel.EchoToolResult("done: "))
	evs := readSSE(t, post(t, c, geminiStream(srv), geminiReq()))
	last := evs[len(evs)-1].data
	call := get(last, "candidates", 0, "content", "parts", 0, "functionCall")
	if str(call, "name") != "run_shell_command" || str(call, "args", "command") != "echo hello" ||
		str(last, "candidates", 0, "finishReason") != "STOP" {
		t.Fatalf("last chunk = %v, want functionCall run_shell_command echo hello with finishReason", last)
	}

	evs = readSSE(t, post(t, c, geminiStream(srv), geminiReq(
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "run it"}}},
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": call}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
			"name": "run_shell_command", "response": map[string]any{"output": "hello"}}}}})))
	var text string
	for _, e := range evs {
		text += str(e.data, "candidates", 0, "content", "parts", 0, "text")
	}
	if text != "done: hello" {
		t.Errorf("answer = %q, want %q", text, "done: hello")
	}
}

func TestErrors(t *testing.T) {
	srv, c := newServer(t)
	for _, status := range []int{401, 429, 500} {
		for _, tc := range []struct {
			api  fakemodel.API
			url  string
			body map[string]any
			// message and kind of the error JSON
			msg, kind func(map[string]any) string
		}{
			{fakemodel.Anthropic, srv.AnthropicBaseURL() + "/v1/messages", anthropicReq(true),
				func(m map[string]any) string { return str(m, "error", "message") },
				func(m map[string]any) string { return str(m, "type") + "/" + str(m, "error", "type") }},
			{fakemodel.OpenAI, srv.OpenAIBaseURL() + "/responses", openaiReq(),
				func(m map[string]any) string { return str(m, "error", "message") },
				func(m map[string]any) string { return str(m, "error", "type") + "/" + str(m, "error", "code") }},
			{fakemodel.Gemini, geminiStream(srv), geminiReq(),
				func(m map[string]any) string { return str(m, "error", "message") },
				func(m map[string]any) string { return str(m, "error", "status") }},
		} {
			srv.Enqueue(fakemodel.Fail(status, "boom"))
			resp := post(t, c, tc.url, tc.body)
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("%s %d: %v", tc.api, status, err)
			}
			if resp.StatusCode != status || tc.msg(m) != "boom" || strings.Trim(tc.kind(m), "/") == "" {
				t.Errorf("%s: got %d %v, want %d with message boom and an error type", tc.api, resp.StatusCode, m, status)
			}
			if tc.api == fakemodel.Gemini && get(m, "error", "code") != float64(status) {
				t.Errorf("gemini error code = %v, want %d", get(m, "error", "code"), status)
			}
		}
	}
}

func TestEmptyScriptFails(t *testing.T) {
	srv, c := newServer(t)
	resp := post(t, c, srv.OpenAIBaseURL()+"/responses", openaiReq())
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "no scripted turn left") {
		t.Errorf("got %d %s, want 500 naming the empty script", resp.StatusCode, b)
	}
}

// TestStall checks, for each API, that a stalled answer sends its first
// bytes, then nothing, and that its handler returns once the client goes
// away, so that Close does not wait for it (goleak checks the rest).
func TestStall(t *testing.T) {
	for _, api := range []fakemodel.API{fakemodel.Anthropic, fakemodel.OpenAI, fakemodel.Gemini} {
		t.Run(string(api), func(t *testing.T) {
			srv, c := newServer(t)
			srv.Enqueue(fakemodel.Stall("partial "))
			url, body := map[fakemodel.API]string{
				fakemodel.Anthropic: srv.AnthropicBaseURL() + "/v1/messages",
				fakemodel.OpenAI:    srv.OpenAIBaseURL() + "/responses",
				fakemodel.Gemini:    geminiStream(srv),
			}[api], map[fakemodel.API]any{
				fakemodel.Anthropic: anthropicReq(true), fakemodel.OpenAI: openaiReq(), fakemodel.Gemini: geminiReq(),
			}[api]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b, _ := json.Marshal(body)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()

			got := make(chan string, 1)
			go func() {
				var seen strings.Builder
				buf := make([]byte, 4096)
				// Read to the end of the event that carries the partial text.
				for s := ""; !strings.Contains(s, "partial ") || !strings.HasSuffix(s, "\n\n"); s = seen.String() {
					n, err := resp.Body.Read(buf)
					seen.Write(buf[:n])
					if err != nil {
						break
					}
				}
				got <- seen.String()
			}()
			select {
			case s := <-got:
				if !strings.Contains(s, "partial ") {
					t.Fatalf("stalled stream = %q, want the partial text first", s)
				}
			case <-time.After(testenv.Timeout(time.Minute)):
				t.Fatal("no first bytes from a stalled answer")
			}
			// Nothing more arrives. (A chunked body may return 0, nil at a
			// chunk boundary: only bytes or an error count.)
			more := make(chan error, 1)
			go func() {
				b := make([]byte, 64)
				for {
					n, err := resp.Body.Read(b)
					if n > 0 && err == nil {
						err = errors.New("more bytes: " + string(b[:n]))
					}
					if err != nil {
						more <- err
						return
					}
				}
			}()
			select {
			case err := <-more:
				t.Fatalf("stalled stream went on: %v", err)
			case <-time.After(200 * time.Millisecond):
				// A negative check: a slow machine can only make it pass
				// when it should not, never fail when it should pass.
			}
			cancel()
			<-more
		})
	}
}

func TestCloseEndsStalledAnswers(t *testing.T) {
	srv := fakemodel.Start()
	srv.Enqueue(fakemodel.Stall(""))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	b, _ := json.Marshal(openaiReq())
	resp, err := (&http.Client{Transport: tr}).Post(srv.OpenAIBaseURL()+"/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testenv.Timeout(time.Minute)):
		t.Fatal("Close hangs while a client waits on a stalled answer")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		// A clean end is fine too; what matters is that the read returned.
		t.Log("stalled stream ended cleanly on Close")
	}
	srv.Close() // a second Close is harmless
}

func TestRecordsRequests(t *testing.T) {
	srv, c := newServer(t)
	srv.Enqueue(fakemodel.Answer("first answer"), fakemodel.Answer("second"))

	var zbody bytes.Buffer
	zw := gzip.NewWriter(&zbody)
	json.NewEncoder(zw).Encode(anthropicReq(true))
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.AnthropicBaseURL()+"/v1/messages?beta=true", &zbody)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("X-Api-Key", "sk-test")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readSSE(t, resp)
	resp.Body.Close()

	readSSE(t, post(t, c, srv.AnthropicBaseURL()+"/v1/messages", anthropicReq(true,
		map[string]any{"role": "user", "content": "first"},
		map[string]any{"role": "assistant", "content": "first answer"},
		map[string]any{"role": "user", "content": "second"})))

	reqs := srv.Scripted()
	if len(reqs) != 2 {
		t.Fatalf("Scripted() = %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" || r.Query != "beta=true" ||
		r.Header.Get("X-Api-Key") != "sk-test" || !r.Contains(`"say hi"`) || r.API != fakemodel.Anthropic {
		t.Errorf("first request = %s %s ? %s key %q body %s", r.Method, r.Path, r.Query, r.Header.Get("X-Api-Key"), r.Body)
	}
	if !reqs[1].Contains("first answer") {
		t.Errorf("second request does not carry the first answer: %s", reqs[1].Body)
	}
	if srv.Pending() != 0 {
		t.Errorf("Pending() = %d, want 0", srv.Pending())
	}
}

// TestCallTool checks that a Call reaches each API as a call of the named
// tool with the given input, streamed and not, and that Codex's namespace
// travels with the OpenAI function_call.
func TestCallTool(t *testing.T) {
	input := map[string]any{"prompt": "review main.go", "workdir": "/src/p"}
	wantInput := func(t *testing.T, raw any) {
		t.Helper()
		var got map[string]any
		switch v := raw.(type) {
		case string:
			if err := json.Unmarshal([]byte(v), &got); err != nil {
				t.Fatalf("input %q: %v", v, err)
			}
		case map[string]any:
			got = v
		}
		if got["prompt"] != "review main.go" || got["workdir"] != "/src/p" {
			t.Errorf("tool input = %v, want %v", got, input)
		}
	}

	t.Run("anthropic", func(t *testing.T) {
		srv, c := newServer(t)
		srv.Enqueue(fakemodel.CallTool("mcp__clinvoke__codex", input), fakemodel.CallTool("mcp__clinvoke__codex", input))
		url := srv.AnthropicBaseURL() + "/v1/messages"
		var name, partial, stop string
		for _, e := range readSSE(t, post(t, c, url, anthropicReq(true))) {
			switch e.name {
			case "content_block_start":
				name = str(e.data, "content_block", "type") + " " + str(e.data, "content_block", "name")
			case "content_block_delta":
				partial += str(e.data, "delta", "partial_json")
			case "message_delta":
				stop = str(e.data, "delta", "stop_reason")
			}
		}
		if name != "tool_use mcp__clinvoke__codex" || stop != "tool_use" {
			t.Errorf("streamed block %q, stop_reason %q; want tool_use mcp__clinvoke__codex, tool_use", name, stop)
		}
		wantInput(t, partial)

		var msg map[string]any
		if err := json.NewDecoder(post(t, c, url, anthropicReq(false)).Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if str(msg, "content", 0, "name") != "mcp__clinvoke__codex" {
			t.Errorf("message = %v, want one tool_use mcp__clinvoke__codex block", msg)
		}
		wantInput(t, get(msg, "content", 0, "input"))
	})

	t.Run("openai", func(t *testing.T) {
		srv, c := newServer(t)
		srv.Enqueue(fakemodel.Turn{Call: &fakemodel.Call{Name: "claude", Namespace: "mcp__clinvoke", Input: input}})
		var call map[string]any
		for _, e := range readSSE(t, post(t, c, srv.OpenAIBaseURL()+"/responses", openaiReq())) {
			if e.name == "response.output_item.done" {
				call, _ = e.data["item"].(map[string]any)
			}
		}
		if str(call, "type") != "function_call" || str(call, "name") != "claude" || str(call, "namespace") != "mcp__clinvoke" {
			t.Fatalf("item = %v, want function_call claude in namespace mcp__clinvoke", call)
		}
		wantInput(t, str(call, "arguments"))
	})

	t.Run("gemini", func(t *testing.T) {
		srv, c := newServer(t)
		srv.Enqueue(fakemodel.CallTool("mcp_clinvoke_claude", input))
		evs := readSSE(t, post(t, c, geminiStream(srv), geminiReq()))
		last := evs[len(evs)-1].data
		call := get(last, "candidates", 0, "content", "parts", 0, "functionCall")
		if str(call, "name") != "mcp_clinvoke_claude" || str(last, "candidates", 0, "finishReason") != "STOP" {
			t.Fatalf("last chunk = %v, want functionCall mcp_clinvoke_claude with finishReason", last)
		}
		wantInput(t, get(call, "args"))
	})
}

// TestPaceAndHeader checks that a paced answer spreads its deltas over
// time for every API (the first arrives before the last is sent), and that
// a turn's headers reach the client, an error's included.
func TestPaceAndHeader(t *testing.T) {
	for _, tc := range []struct {
		api  string
		url  func(*fakemodel.Server) string
		body any
	}{
		{"anthropic", func(s *fakemodel.Server) string { return s.AnthropicBaseURL() + "/v1/messages" }, anthropicReq(true)},
		{"openai", func(s *fakemodel.Server) string { return s.OpenAIBaseURL() + "/responses" }, openaiReq()},
		{"gemini", geminiStream, geminiReq()},
	} {
		t.Run(tc.api, func(t *testing.T) {
			srv, c := newServer(t)
			const pace = 40 * time.Millisecond
			srv.Enqueue(fakemodel.Turn{Text: "one two three four", Pace: pace, Header: http.Header{"X-Test": {"paced"}}},
				fakemodel.Turn{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"7"}}})
			start := time.Now()
			resp := post(t, c, tc.url(srv), tc.body)
			if got := resp.Header.Get("X-Test"); got != "paced" {
				t.Errorf("X-Test header = %q, want paced", got)
			}
			readSSE(t, resp)
			// Three pauses between four deltas: a lower bound, which a
			// busy machine cannot break.
			if took := time.Since(start); took < 3*pace {
				t.Errorf("a paced answer of 4 deltas took %v, want at least %v", took, 3*pace)
			}
			resp = post(t, c, tc.url(srv), tc.body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
				t.Errorf("error answer: status %d, Retry-After %q; want 429 and 7", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
}

// TestOpenAICustomToolCall checks a call of a freeform tool (Codex's
// apply_patch): a custom_tool_call whose input is the text, and the
// custom_tool_call_output that answers it echoed in the next turn.
func TestOpenAICustomToolCall(t *testing.T) {
	srv, c := newServer(t)
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
	srv.Enqueue(fakemodel.Turn{Call: &fakemodel.Call{Name: "apply_patch", Freeform: patch}}, fakemodel.EchoToolResult("done: "))
	url := srv.OpenAIBaseURL() + "/responses"
	var call map[string]any
	for _, e := range readSSE(t, post(t, c, url, openaiReq())) {
		if e.name == "response.output_item.done" {
			call, _ = e.data["item"].(map[string]any)
		}
	}
	if str(call, "type") != "custom_tool_call" || str(call, "name") != "apply_patch" || str(call, "input") != patch || str(call, "call_id") == "" {
		t.Fatalf("item = %v, want custom_tool_call apply_patch with the patch as its input", call)
	}
	evs := readSSE(t, post(t, c, url, openaiReq(call,
		map[string]any{"type": "custom_tool_call_output", "call_id": str(call, "call_id"), "output": "Success."})))
	if got := str(evs[len(evs)-1].data, "response", "output", 0, "content", 0, "text"); got != "done: Success." {
		t.Errorf("answer = %q, want %q", got, "done: Success.")
	}
}
