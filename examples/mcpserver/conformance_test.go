package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseEvent is one event of an SSE stream.
type sseEvent struct{ id, name, data, retry string }

// readEvents reads the events of an SSE stream until it ends, or until
// stop returns true for one.
func readEvents(t *testing.T, body io.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.name = value
		case "data":
			ev.data += value
		case "retry":
			ev.retry = value
		case "":
			if ev != (sseEvent{}) {
				events = append(events, ev)
				if stop != nil && stop(ev) {
					return events
				}
			}
			ev = sseEvent{}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the SSE stream: %v", err)
	}
	return events
}

// isAnswer reports whether ev carries the answer of the request of id 1.
func isAnswer(ev sseEvent) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	return json.Unmarshal([]byte(ev.data), &msg) == nil && string(msg.ID) == "1" && msg.Result != nil
}

// The exchange of the conformance suite's server-sse-polling scenario:
// test_reconnection's stream closes before its answer, and the answer
// arrives on the stream the client resumes with Last-Event-ID.
func TestTestReconnectionAnswersOnResumedStream(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v0.0.1"}, nil)
	ct := newConformanceTools()
	ct.retry = 10 * time.Millisecond
	ct.register(server)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	srv := httptest.NewServer(ct.handler(h))
	defer srv.Close()

	var sid string
	do := func(method, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode/100 != 2 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("%s: HTTP %s: %s", method, resp.Status, b)
		}
		return resp
	}
	resp := do("POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	sid = resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sid == "" {
		t.Fatal("initialize gave no Mcp-Session-Id")
	}
	defer func() { do("DELETE", "").Body.Close() }()
	resp = do("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	resp = do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`)
	posted := readEvents(t, resp.Body, nil)
	resp.Body.Close()
	var last string
	var closed bool
	for _, ev := range posted {
		if isAnswer(ev) {
			t.Fatalf("the answer came on the call's own stream, before it closed: %+v", posted)
		}
		if ev.id != "" {
			last = ev.id
		}
		closed = closed || ev.name == "close" && ev.retry == "10"
	}
	if last == "" || !closed {
		t.Fatalf("the call's stream ended with events %+v, want a priming event with an id and a close event with retry 10", posted)
	}

	resp = do("GET", "", "Last-Event-ID", last)
	resumed := readEvents(t, resp.Body, isAnswer)
	resp.Body.Close()
	if len(resumed) == 0 || !isAnswer(resumed[len(resumed)-1]) {
		t.Fatalf("the stream resumed after %s gave %+v, want the answer of the call", last, resumed)
	}
	if got := resumed[len(resumed)-1].data; !strings.Contains(got, "Reconnection test completed successfully") {
		t.Errorf("the answer is %s, want the tool's text", got)
	}
}
