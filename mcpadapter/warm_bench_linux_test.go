package mcpadapter_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// BenchmarkWarmCall calls a tool again and again with one session_id over
// in-memory transports: "cold" without warm sessions (each call a run of
// the fake resuming the conversation, the baseline), "warm" with them
// (each call a turn of one fake process). The fake starts in milliseconds,
// so the ratio shows the adapter's and the library's own saving; the real
// CLIs' start-up (docs/sessions.md) is what a warm call saves on top.
func BenchmarkWarmCall(b *testing.B) {
	for _, cli := range []string{fakeagent.Codex, fakeagent.Claude, fakeagent.Gemini} {
		for _, mode := range []string{"cold", "warm"} {
			b.Run(cli+"/"+mode, func(b *testing.B) {
				s := fakeagent.Script{Flavor: cli, Tag: fakeagent.NewTag()}
				opts := []invoker.Options{invoker.Options{Binary: os.Args[0], Env: s.Env()}}
				var inv invoker.Invoker
				switch cli {
				case fakeagent.Codex:
					inv = codex.New(opts...)
				case fakeagent.Claude:
					inv = claude.New(opts...)
				default:
					inv = gemini.New(opts...)
				}
				o := &mcpadapter.Options{}
				if mode == "warm" {
					o.WarmSessions.MaxSessions = 1
				}
				server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-bench", Version: "v0.0.1"}, nil)
				tools, err := mcpadapter.Register(server, o, inv)
				if err != nil {
					b.Fatalf("Register() error = %v", err)
				}
				b.Cleanup(func() {
					wctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
					defer cancel()
					if err := tools.Shutdown(wctx); err != nil {
						b.Errorf("Shutdown() = %v", err)
					}
					reportSurvivors(b, s.Tag)
				})
				ct, st := mcp.NewInMemoryTransports()
				ss, err := server.Connect(context.Background(), st, nil)
				if err != nil {
					b.Fatalf("Server.Connect() error = %v", err)
				}
				b.Cleanup(func() {
					if err := ss.Wait(); err != nil {
						b.Errorf("ServerSession.Wait() error = %v", err)
					}
				})
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0.0.1"}, nil).Connect(context.Background(), ct, nil)
				if err != nil {
					b.Fatalf("Client.Connect() error = %v", err)
				}
				b.Cleanup(func() {
					if err := cs.Close(); err != nil {
						b.Errorf("ClientSession.Close() error = %v", err)
					}
				})
				dir := b.TempDir()
				call := func(sessionID string) mcpadapter.Output {
					a := map[string]any{"prompt": "say hello", "workdir": dir}
					if sessionID != "" {
						a["session_id"] = sessionID
					}
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: cli, Arguments: a})
					if err != nil || res.IsError {
						b.Fatalf("CallTool() = %+v, %v; want a result", res, err)
					}
					var out mcpadapter.Output
					if err := decodeB(res, &out); err != nil {
						b.Fatal(err)
					}
					return out
				}
				id := call("").SessionID
				for b.Loop() {
					call(id)
				}
			})
		}
	}
}

// decodeB decodes a result's structured content into out.
func decodeB(res *mcp.CallToolResult, out any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
