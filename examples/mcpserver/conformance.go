package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test tools of the official MCP conformance suite
// (@modelcontextprotocol/conformance), served with -conformance-tools so
// that the suite can check what only they exercise. They run no agent.

// Defaults of the test_reconnection tool.
const (
	// reconnectRetry is the reconnection delay that test_reconnection
	// sends with the close of its stream.
	reconnectRetry = 100 * time.Millisecond

	// reconnectBound bounds test_reconnection's wait for its client to
	// resume; after it the result is answered anyway, kept in the event
	// store for a later resumption.
	reconnectBound = 30 * time.Second
)

// conformanceTools serves the suite's test tools, and notes the streams
// that clients resume, for which test_reconnection waits.
type conformanceTools struct {
	retry time.Duration // the reconnection delay sent with the close
	bound time.Duration // the longest wait for the resumption

	mu      sync.Mutex
	waiting map[string][]chan struct{} // by session id: closed when a stream of the session resumes
}

func newConformanceTools() *conformanceTools {
	return &conformanceTools{retry: reconnectRetry, bound: reconnectBound, waiting: map[string][]chan struct{}{}}
}

// register adds the test tools to s.
func (ct *conformanceTools) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "test_reconnection",
		Description: "A tool of the MCP conformance suite: it closes the SSE stream of its call, " +
			"waits for the client to resume it with Last-Event-ID, and answers on the resumed stream.",
	}, ct.testReconnection)
}

// testReconnection closes the stream of its call (SEP-1699), with a retry
// field, and answers once the client has resumed a stream of its session
// with Last-Event-ID: the answer reaches the client on the resumed stream,
// as the answer of any call whose stream dropped does.
func (ct *conformanceTools) testReconnection(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	if req.Extra == nil || req.Extra.CloseSSEStream == nil || req.Session == nil || req.Session.ID() == "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: "test_reconnection needs a resumable stream: serve streamable HTTP with sessions (-http without -stateless)",
		}}}, nil, nil
	}
	resumed, forget := ct.expect(req.Session.ID())
	defer forget()
	req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: ct.retry})
	t := time.NewTimer(ct.bound)
	defer t.Stop()
	select {
	case <-resumed:
	case <-t.C: // answered into the event store, for a later resumption
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Reconnection test completed successfully"}}}, nil, nil
}

// expect returns a channel closed when a stream of session sid is next
// resumed, and the function that stops waiting for it.
func (ct *conformanceTools) expect(sid string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	ct.mu.Lock()
	ct.waiting[sid] = append(ct.waiting[sid], ch)
	ct.mu.Unlock()
	return ch, func() {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		for i, c := range ct.waiting[sid] {
			if c == ch {
				ct.waiting[sid] = append(ct.waiting[sid][:i], ct.waiting[sid][i+1:]...)
				break
			}
		}
		if len(ct.waiting[sid]) == 0 {
			delete(ct.waiting, sid)
		}
	}
}

// handler returns h (the SDK's streamable HTTP handler) noting the
// resumptions: a GET with Last-Event-ID releases the calls of its session
// waiting for one. The SDK replays what the stream missed and attaches it
// under one lock, so an answer given from then on reaches the client on
// the resumed stream, replayed or live.
func (ct *conformanceTools) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodGet && sid != "" && r.Header.Get("Last-Event-ID") != "" {
			ct.mu.Lock()
			for _, ch := range ct.waiting[sid] {
				close(ch)
			}
			delete(ct.waiting, sid)
			ct.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}
