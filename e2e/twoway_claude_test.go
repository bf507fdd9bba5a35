//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Claude Code's two-way control, measured with 2.1.197: approvals are
// can_use_tool control requests (--permission-prompt-tool=stdio), Go tools
// are SDK MCP servers reached with mcp_message control requests, and
// external servers go into --mcp-config (see the claude package). The
// model calls an MCP tool TOOL of server SERVER as mcp__SERVER__TOOL, and
// reads a denial's message and a tool's text as they are.
func init() {
	twoWay["claude"] = &twoWayCLI{
		mcpTool:       func(server, tool string) string { return "mcp__" + server + "__" + tool },
		ask:           invoker.Unlimited,
		shellTool:     "Bash",
		denial:        func(message string) string { return message },
		echoesExactly: true,
		write: func(path, content string) fakemodel.Turn {
			return fakemodel.CallTool("Write", map[string]any{"file_path": path, "content": content})
		},
		approval:   claudeApproval,
		goTools:    claudeGoTools,
		mcpServers: claudeMCPServers,
	}
}

// claudeApproval holds Claude Code's own approval scenarios: a changed
// input, a file change, an allow for the session, and the ceiling of the
// permission level.
func claudeApproval(t *testing.T, r *rig) {
	t.Run("changed input", func(t *testing.T) {
		r := newRig(t, r.cli)
		asked, ran := filepath.Join(r.workdir, "asked"), filepath.Join(r.workdir, "ran")
		approvalTurn(t, r, invoker.Unlimited,
			invoker.Decision{Allow: true, Input: []byte(fmt.Sprintf(`{"command":%q}`, "touch "+ran))},
			fakemodel.Shell("touch "+asked))
		absent(t, asked, "the original command ran")
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("the changed command did not run: %v", err)
		}
	})
	t.Run("file change", func(t *testing.T) {
		// WorkspaceWrite: an edit inside the workdir is asked about.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "written.txt")
		got, _ := approvalTurn(t, r, invoker.WorkspaceWrite, invoker.Decision{Allow: true},
			fakemodel.CallTool("Write", map[string]any{"file_path": file, "content": "hi\n"}))
		if len(got) != 1 || got[0].Kind != "file_change" || len(got[0].Paths) == 0 || got[0].Paths[0] != file {
			t.Errorf("approvals = %s, want one file_change of %s", jsonString(got), file)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "hi\n" {
			t.Errorf("the approved write: %q, %v", b, err)
		}
	})
	t.Run("for the session", func(t *testing.T) {
		// An allow for the session answers the next Bash call without
		// asking again.
		r := newRig(t, r.cli)
		a, b := filepath.Join(r.workdir, "a"), filepath.Join(r.workdir, "b")
		got, _ := approvalTurn(t, r, invoker.Unlimited, invoker.Decision{Allow: true, ForSession: true},
			fakemodel.Shell("touch "+a), fakemodel.Shell("touch "+b))
		if n := len(got); n != 1 {
			t.Errorf("the callback was asked %d times, want once", n)
		}
		for _, f := range []string{a, b} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	})
	t.Run("above the ceiling", func(t *testing.T) {
		// Read-only: the touch is denied without asking, naming the level.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "denied")
		got, res := approvalTurn(t, r, invoker.ReadOnly, invoker.Decision{Allow: true}, fakemodel.Shell("touch "+file))
		if len(got) != 0 {
			t.Errorf("approvals = %s, want none above the ceiling", jsonString(got))
		}
		absent(t, file, "the command ran above the ceiling")
		if !strings.Contains(res.Text, "read-only") {
			t.Errorf("Text = %q, want the denial naming the level", res.Text)
		}
	})
}

// claudeGoTools holds Claude Code's own scenarios of Go tools: sessions
// whose SDK server serves more than one turn.
func claudeGoTools(t *testing.T, r *rig) {
	t.Run("session of two turns", func(t *testing.T) {
		// The SDK server's connection, made in the first turn, serves the
		// second.
		r := newRig(t, r.cli)
		var rec recorder
		s := r.openSession(t, r.inv, invoker.SessionRequest{
			MCPServers: []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}})
		for i, who := range []string{"bob", "ann"} {
			r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__record", map[string]any{"text": who}), fakemodel.EchoToolResult("after: "))
			claudeTurn(t, s, invoker.TurnRequest{Prompt: "record " + who}, "after: recorded: "+who)
			if got := rec.texts(); len(got) != i+1 || got[i] != who {
				t.Errorf("the handler saw %q, want %q last", got, who)
			}
		}
		r.closeAndCheck(t, s)
	})
	t.Run("session after a cancelled call", func(t *testing.T) {
		// A turn cancelled while the handler blocks leaves the session and
		// its server usable: the next turn's call is served.
		r := newRig(t, r.cli)
		h := newBlocker()
		var blocking atomic.Bool
		blocking.Store(true)
		srv := recordServer(func(ctx context.Context, a recordArgs) error {
			if blocking.Load() {
				return h.handle(ctx, a)
			}
			return nil
		})
		s := r.openSession(t, r.inv, invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "gotools", Server: srv}}})
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__record", map[string]any{"text": "eve"}))
		if _, err := s.Turn(cancelOn(t, h.started), invoker.TurnRequest{Prompt: "record eve"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Turn() error = %v, want one matching context.Canceled", err)
		}
		h.returned(t, "Turn")
		blocking.Store(false)
		if n := r.srv.Pending(); n != 0 {
			t.Fatalf("%d scripted turns left after the interrupt", n)
		}
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__record", map[string]any{"text": "bob"}), fakemodel.EchoToolResult("after: "))
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "record bob"}, "after: recorded: bob")
		r.closeAndCheck(t, s)
	})
}

// claudeMCPServers holds Claude Code's own scenario of external MCP
// servers: a URL server whose headers carry a secret.
func claudeMCPServers(t *testing.T, r *rig) {
	t.Run("http with headers", func(t *testing.T) {
		r := newRig(t, r.cli)
		const secret = "Bearer s3cret-clinvoke-e2e"
		var unauthorized atomic.Int32
		var leaked atomic.Value
		s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "ping", Description: "Answers pong."},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				// While the CLI runs: the secret is on no command line.
				if ps := findProcs(func(_, cmdline []byte) bool { return bytes.Contains(cmdline, []byte("s3cret")) }); len(ps) > 0 {
					leaked.Store(strings.Join(ps, "\n"))
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
			})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != secret {
				unauthorized.Add(1)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		}))
		defer func() {
			srv.Close()
			for ss := range s.Sessions() {
				ss.Close()
			}
		}()
		r.srv.Enqueue(fakemodel.CallTool("mcp__web__ping", nil), fakemodel.EchoToolResult("after: "))
		req := r.request("ping")
		req.MCPServers = []invoker.MCPServer{{Name: "web", URL: srv.URL, Headers: map[string]string{"Authorization": secret}}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if res.Text != "after: pong" {
			t.Errorf("Text = %q, want the URL server's answer", res.Text)
		}
		if n := unauthorized.Load(); n > 0 {
			t.Errorf("%d requests came without the header", n)
		}
		if ps, _ := leaked.Load().(string); ps != "" {
			t.Errorf("the header's secret is on a command line:\n%s", ps)
		}
	})
}
