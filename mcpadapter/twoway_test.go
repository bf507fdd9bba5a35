package mcpadapter_test

// Options.Approve and Options.MCPServers with the real backends, which run
// this test binary as their CLI (invokertest.Agent): the agent asks to
// edit a file and calls a Go tool in each CLI's own protocol.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

var backends = map[string]func(...invoker.Options) invoker.Invoker{
	"codex": codex.New, "claude": claude.New, "gemini": gemini.New,
}

// under reports whether every path lies in dir.
func under(dir string, paths []string) bool {
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return false
		}
	}
	return len(paths) > 0
}

type noteIn struct {
	Text string `json:"text"`
}

// notesServer is a Go MCP server with one tool, notes/add, which counts
// its calls.
func notesServer(calls *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds a note."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted: " + in.Text}}}, nil, nil
		})
	return s
}

// TestTwoWayOptions: with each real backend, Options.Approve lets the agent
// edit a file in one folder of the workdir and refuses one elsewhere in
// the workdir (where the permission level alone would let it write), and
// the agent calls the Go tool of Options.MCPServers.
func TestTwoWayOptions(t *testing.T) {
	for _, cli := range []string{"codex", "claude", "gemini"} {
		t.Run(cli, func(t *testing.T) {
			workdir := resolved(t, t.TempDir())
			folder := filepath.Join(workdir, "notes")
			for _, tc := range []struct {
				name    string
				file    string
				want    string // a line of the agent's answer
				written bool
			}{
				{"inside", filepath.Join(folder, "a.txt"), "edited", true},
				{"outside", filepath.Join(workdir, "main.go"), "denied", false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var edits, toolCalls atomic.Int64
					agent := invokertest.Agent{CLI: cli, Edit: tc.file, CallTool: "notes/add", ToolArgs: map[string]any{"text": "hello"}}
					h := newHarness(t, &mcpadapter.Options{
						MaxPermission: invoker.WorkspaceWrite,
						MCPServers:    []invoker.MCPServer{{Name: "notes", Server: notesServer(&toolCalls)}},
						Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
							if a.Kind == "file_change" {
								edits.Add(1)
								if !under(folder, a.Paths) {
									return invoker.Decision{Message: "only files under " + folder + " may change"}
								}
							}
							return call.Defer(ctx, a)
						},
					}, backends[cli](agent.Options()))
					var out mcpadapter.Output
					h.call(context.Background(), t, cli, args("take a note", workdir, "permission", "workspace-write"), &out)
					if out.Status != mcpadapter.StatusCompleted {
						t.Fatalf("output %+v, want completed", out)
					}
					for _, w := range []string{tc.want, "noted: hello"} {
						if !strings.Contains(out.Text, w) {
							t.Errorf("answer %q, want a line %q", out.Text, w)
						}
					}
					if n := edits.Load(); n != 1 {
						t.Errorf("Options.Approve asked about %d edits, want 1", n)
					}
					if n := toolCalls.Load(); n != 1 {
						t.Errorf("the Go tool was called %d times, want once", n)
					}
					_, err := os.Stat(tc.file)
					if written := err == nil; written != tc.written {
						t.Errorf("%s written: %v, want %v", tc.file, written, tc.written)
					}
				})
			}
		})
	}
}

// TestTwoWayOptionsWrapperClash: a wrapper that adds a server under the
// name of one of Options.MCPServers has the call refused with the
// invoker's ErrInvalidRequest, naming the clash, before anything starts.
func TestTwoWayOptionsWrapperClash(t *testing.T) {
	var calls atomic.Int64
	agent := invokertest.Agent{CLI: "claude", CallTool: "notes/add", ToolArgs: map[string]any{"text": "x"}}
	w := &wrapper{Invoker: claude.New(agent.Options()), servers: []invoker.MCPServer{{Name: "notes", Command: "notes-server"}}}
	h := newHarness(t, &mcpadapter.Options{MCPServers: []invoker.MCPServer{{Name: "notes", Server: notesServer(&calls)}}}, w)
	var out mcpadapter.Output
	h.call(context.Background(), t, "claude", args("take a note", t.TempDir()), &out)
	if out.Status != mcpadapter.StatusRefused || !strings.Contains(out.Error, "invalid request") ||
		!strings.Contains(out.Error, `"notes"`) || !strings.Contains(out.Error, "twice") {
		t.Errorf("output %+v, want a failure naming the server given twice", out)
	}
	if calls.Load() != 0 {
		t.Error("the Go tool was called")
	}
}

// TestTwoWayOptionsApprovePanics: a panic in Options.Approve fails the
// run, whose tree is reaped, and the server keeps serving.
func TestTwoWayOptionsApprovePanics(t *testing.T) {
	agent := invokertest.Agent{CLI: "claude", Edit: "a.txt"}
	h := newHarness(t, &mcpadapter.Options{
		MaxPermission: invoker.WorkspaceWrite,
		Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
			if call.Run.Prompt == "panic" {
				panic("a bug in the policy")
			}
			return invoker.Decision{Allow: true}
		},
	}, claude.New(agent.Options()))
	dir := t.TempDir()
	var out mcpadapter.Output
	h.call(context.Background(), t, "claude", args("panic", dir, "permission", "workspace-write"), &out)
	if out.Status != mcpadapter.StatusFailed || !strings.Contains(out.Error, "a bug in the policy") {
		t.Errorf("output %+v, want a failed run naming the panic", out)
	}
	h.call(context.Background(), t, "claude", args("edit", dir, "permission", "workspace-write"), &out)
	if out.Status != mcpadapter.StatusCompleted || out.Text != "edited" {
		t.Errorf("output %+v after the panic, want the next call served", out)
	}
	if pids := invokertest.Survivors(); len(pids) > 0 {
		t.Errorf("processes alive after the calls: %v", pids)
	}
}
