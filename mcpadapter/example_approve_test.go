package mcpadapter_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
	"github.com/clinvoke/clinvoke/mcpadapter/mcptest"
)

// A server with a policy of its own and a tool of its own, in Go: the
// agent (Claude Code, played by an invokertest.Agent) may change files
// under docs/ only, and may call the Go tool tickets/create. What the
// policy does not refuse, it defers to Options.Approvals (allow, by
// default).
func ExampleOptions_approve() {
	workdir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(workdir)
	workdir, _ = filepath.EvalSymlinks(workdir) // as the adapter resolves it
	docs := filepath.Join(workdir, "docs")

	tickets := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "v1.0.0"}, nil)
	mcp.AddTool(tickets, &mcp.Tool{Name: "create", Description: "Files a ticket."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct{ Title string }) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "filed: " + in.Title}}}, nil, nil
		})
	opts := &mcpadapter.Options{
		MaxPermission: invoker.WorkspaceWrite,
		MCPServers:    []invoker.MCPServer{{Name: "tickets", Server: tickets}},
		Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
			for _, p := range a.Paths {
				if !strings.HasPrefix(p, docs+string(filepath.Separator)) {
					return invoker.Decision{Message: "only files under docs/ may change"}
				}
			}
			return call.Defer(ctx, a)
		},
	}

	for _, file := range []string{"docs/notes.md", "main.go"} {
		agent := invokertest.Agent{CLI: "claude", Edit: file,
			CallTool: "tickets/create", ToolArgs: map[string]any{"Title": "update " + file}}
		server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
		tools, err := mcpadapter.Register(server, opts, claude.New(agent.Options()))
		if err != nil {
			log.Fatal(err)
		}
		c, err := mcptest.NewClient(server, tools, nil)
		if err != nil {
			log.Fatal(err)
		}
		out, err := c.Call(context.Background(), "claude",
			mcpadapter.Input{Prompt: "Update " + file + ".", Workdir: workdir, Permission: "workspace-write"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %q\n", file, out.Text)
		if err := c.Close(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// docs/notes.md: "edited\nfiled: update docs/notes.md"
	// main.go: "denied: only files under docs/ may change\nfiled: update main.go"
}
