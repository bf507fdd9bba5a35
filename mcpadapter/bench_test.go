package mcpadapter_test

import (
	"context"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// benchCodex returns the Codex invoker running the test binary as a fake
// Codex that answers at once, and the fake's tag.
func benchCodex() (invoker.Invoker, string) {
	s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: "quick", Tag: fakeagent.NewTag()}
	return codex.New(invoker.Options{Binary: os.Args[0], Env: s.Env()}), s.Tag
}

func reportSurvivors(b *testing.B, tag string) {
	b.Helper()
	left := fakeagent.Survivors(tag)
	b.ReportMetric(float64(len(left)), "survivors")
	if len(left) > 0 {
		b.Errorf("processes alive after the call returned: %v", left)
	}
}

// BenchmarkMCPCall calls the codex tool over in-memory transports: one
// client session, each call a full round trip to a run of the fake. Its
// baseline is BenchmarkDirectInvoke.
func BenchmarkMCPCall(b *testing.B) {
	inv, tag := benchCodex()
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-bench", Version: "v0.0.1"}, nil)
	if _, err := mcpadapter.Register(server, nil, inv); err != nil {
		b.Fatalf("Register() error = %v", err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		b.Fatalf("Server.Connect() error = %v", err)
	}
	b.Cleanup(func() {
		if err := ss.Wait(); err != nil {
			b.Errorf("ServerSession.Wait() error = %v", err)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		b.Fatalf("Client.Connect() error = %v", err)
	}
	b.Cleanup(func() {
		if err := cs.Close(); err != nil {
			b.Errorf("ClientSession.Close() error = %v", err)
		}
	})
	params := &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "say hello", "workdir": b.TempDir()}}
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("CallTool() = %+v, %v; want a result", res, err)
		}
	}
	reportSurvivors(b, tag)
}

// BenchmarkDirectInvoke runs the same fake through the same Invoker,
// without MCP.
func BenchmarkDirectInvoke(b *testing.B) {
	inv, tag := benchCodex()
	req := invoker.Request{Prompt: "say hello", Workdir: b.TempDir()}
	for b.Loop() {
		if _, err := inv.Invoke(context.Background(), req); err != nil {
			b.Fatalf("Invoke() error = %v, want nil", err)
		}
	}
	reportSurvivors(b, tag)
}
