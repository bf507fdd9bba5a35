//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// A Go tool's result of 17 MiB, more than the line limit of the go-sdk's
// in-memory transport (16 MiB), reaches Claude Code over its control
// protocol: whatever Claude Code then gives the model of a result that
// large, the call does not break the SDK server, and the next turn's call
// of it is served.
func TestClaudeGoToolLargeResult(t *testing.T) {
	r := newRig(t, cliNamed("claude"))
	const size = 17 << 20
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "record", Description: "Record a text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a recordArgs) (*mcp.CallToolResult, any, error) {
			text := "recorded: " + a.Text
			if calls.Add(1) == 1 {
				text = strings.Repeat("x", size)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	s := r.openSession(t, r.inv, invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "gotools", Server: srv}}})

	r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__record", map[string]any{"text": "big"}), fakemodel.Answer("after the big one"))
	claudeTurn(t, s, invoker.TurnRequest{Prompt: "record big"}, "after the big one")
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler was called %d times, want once", n)
	}
	body := lastScripted(t, r.srv)
	if i := strings.Index(body, "mcphost"); i >= 0 {
		t.Errorf("the model read a transport failure for the large result: ...%s...", body[max(i-100, 0):min(i+200, len(body))])
	}
	t.Logf("the model's request after the %d-byte result: %d bytes, %d of them the result's", size, len(body), strings.Count(body, "x"))

	r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__record", map[string]any{"text": "bob"}), fakemodel.EchoToolResult("after: "))
	claudeTurn(t, s, invoker.TurnRequest{Prompt: "record bob"}, "after: recorded: bob")
	r.closeAndCheck(t, s)
}
