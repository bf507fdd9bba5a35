package claude_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// sizedServer returns a server with a tool "big" whose results are texts of
// the sizes given, in order, one call after another (the last one for any
// later call).
func sizedServer(sizes ...int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1.0.0"}, nil)
	var calls atomic.Int64
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns a long text."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			n := sizes[min(int(calls.Add(1))-1, len(sizes)-1)]
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", n)}}}, nil, nil
		})
	return s
}

// openTools opens a session of the fake Claude Code calling the tool "big"
// of srv in every turn.
func openTools(t *testing.T, srv *mcp.Server, opts invoker.Options) invoker.Session {
	t.Helper()
	a := invokertest.Agent{CLI: "claude", CallTool: "tools/big", ToolArgs: map[string]any{}}
	s, err := claude.New(a.Options(), opts).OpenSession(t.Context(), invoker.SessionRequest{Workdir: t.TempDir(),
		MCPServers: []invoker.MCPServer{{Name: "tools", Server: srv}}})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A Go tool's result of 16 MiB, over the line limit of the go-sdk's
// in-memory transport once in its JSON-RPC reply, reaches Claude Code
// whole, within the run's line limit, and the server goes on serving.
// (Larger ones take as much longer to test, and no more.)
func TestGoToolLargeResult(t *testing.T) {
	const size = 16 << 20
	s := openTools(t, sizedServer(size, 5), invoker.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a failure must not hang
	defer cancel()
	res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "call"})
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	if line, _, _ := strings.Cut(res.Text, "\n"); len(line) != size || strings.Trim(line, "x") != "" {
		t.Errorf("the agent read %d bytes of the tool's result (%.60q...), want all %d", len(line), line, size)
	}
	res, err = s.Turn(ctx, invoker.TurnRequest{Prompt: "again"})
	if line, _, _ := strings.Cut(res.Text, "\n"); err != nil || line != "xxxxx" {
		t.Errorf("the next call: Turn = %.80q, %v; want the tool's result", res.Text, err)
	}
}

// A result whose reply would exceed the run's line limit fails that call
// alone, with a tool error the model reads, and the next call works.
func TestGoToolResultOverLineLimit(t *testing.T) {
	const limit = 1 << 20
	s := openTools(t, sizedServer(2*limit, 5), invoker.Options{MaxLineSize: limit})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure must not hang
	defer cancel()
	res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "call"})
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	line, _, _ := strings.Cut(res.Text, "\n")
	if !strings.HasPrefix(line, "tool error: ") || !strings.Contains(line, "more than the 1048576 bytes the run's line limit") {
		t.Errorf("answer = %.200q, want the model to read a tool error naming the limit", line)
	}
	res, err = s.Turn(ctx, invoker.TurnRequest{Prompt: "again"})
	if line, _, _ := strings.Cut(res.Text, "\n"); err != nil || line != "xxxxx" {
		t.Errorf("the next call: Turn = %.80q, %v; want the tool's result", res.Text, err)
	}
}

// Questions beyond the cap are denied with a message Claude Code gives the
// model.
func TestApprovalCapTellsTheModel(t *testing.T) {
	const max, extra = 64, 2
	var mu sync.Mutex
	refused := 0
	release := make(chan struct{})
	a := invokertest.Agent{CLI: "claude", Ask: "true", AskCount: max + extra}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure must not hang
	defer cancel()
	res, err := claude.New(a.Options()).Invoke(ctx, invoker.Request{Prompt: "ask", Workdir: t.TempDir(),
		Permission: invoker.Unlimited,
		Approve: func(ctx context.Context, _ invoker.Approval) invoker.Decision {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return invoker.Decision{Message: "held"}
		},
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning && ev.Tool != nil {
				mu.Lock()
				defer mu.Unlock()
				if refused++; refused == extra {
					close(release)
				}
			}
		}})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	lines := strings.Split(res.Text, "\n")
	var held, capped int
	for _, l := range lines {
		switch {
		case l == "denied: held":
			held++
		case strings.HasPrefix(l, "denied: Denied without asking the program: 64 earlier requests of this turn still wait"):
			capped++
		}
	}
	if held != max || capped != extra {
		t.Errorf("the model read %d answers of Approve and %d refusals, want %d and %d:\n%s", held, capped, max, extra, res.Text)
	}
}
