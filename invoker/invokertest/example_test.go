package invokertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// An Agent stands in for a CLI: the real backend runs it as it runs the
// CLI. (This package's TestMain hands the test binary over to it, as
// invokertest.Main does.)
func ExampleAgent() {
	agent := invokertest.Agent{CLI: "codex", SessionID: "thread-1", Tool: true, Answer: "It prints hello."}
	res, err := codex.New(agent.Options()).Invoke(context.Background(), invoker.Request{
		Prompt:  "What does `echo hello` print?",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) { fmt.Println(ev.Kind) },
	})
	fmt.Println(res.Text, res.SessionID, err)
	// Output:
	// session
	// tool_call
	// tool_result
	// message
	// usage
	// done
	// It prints hello. thread-1 <nil>
}

// An Agent misbehaves on demand: here its model stalls after half an
// answer, and a cancel stops it; the partial answer survives, and the
// agent and the processes it left behind are gone when Invoke returns.
func ExampleAgent_stall() {
	agent := invokertest.Agent{CLI: "claude", Answer: "Half an", Stall: time.Hour, LeaveBehind: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := claude.New(agent.Options()).Invoke(ctx, invoker.Request{
		Prompt:  "Explain.",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				cancel() // half an answer is enough
			}
		},
	})
	fmt.Printf("%q %v\n", res.Text, errors.Is(err, context.Canceled))
	fmt.Println("survivors:", len(invokertest.Survivors()))
	// Output:
	// "Half an" true
	// survivors: 0
}

// An Agent asks for permission as its CLI does, so a test can check an
// Approve callback without a model or a key: here the agent asks to run a
// command, the callback refuses it, and the command does not run.
func ExampleAgent_approve() {
	workdir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(workdir)
	agent := invokertest.Agent{CLI: "claude", Ask: "touch deployed"}
	res, err := claude.New(agent.Options()).Invoke(context.Background(), invoker.Request{
		Prompt:     "Deploy.",
		Workdir:    workdir,
		Permission: invoker.Unlimited,
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			fmt.Println("asked:", a.Kind, a.Command)
			return invoker.Decision{Message: "no deploys on Fridays"}
		},
	})
	_, statErr := os.Stat(filepath.Join(workdir, "deployed"))
	fmt.Println(res.Text, err)
	fmt.Println("ran:", statErr == nil)
	// Output:
	// asked: command touch deployed
	// denied: no deploys on Fridays <nil>
	// ran: false
}

// An Agent asks before it changes a file, as its CLI does, so a test can
// check how an Approve callback treats file changes: here the callback
// allows the change, and the agent writes the file.
func ExampleAgent_edit() {
	workdir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(workdir)
	agent := invokertest.Agent{CLI: "codex", Edit: "CHANGELOG.md"}
	res, err := codex.New(agent.Options()).Invoke(context.Background(), invoker.Request{
		Prompt:     "Note the fix in the changelog.",
		Workdir:    workdir,
		Permission: invoker.WorkspaceWrite,
		Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
			fmt.Println("asked:", a.Kind, filepath.Base(a.Paths[0]))
			return invoker.Decision{Allow: true}
		},
	})
	b, _ := os.ReadFile(filepath.Join(workdir, "CHANGELOG.md"))
	fmt.Println(res.Text, err)
	fmt.Printf("written: %q\n", b)
	// Output:
	// asked: file_change CHANGELOG.md
	// edited <nil>
	// written: "edited by the fake agent\n"
}

// An Agent calls the tools of a run's Go MCP server the way its CLI
// does, so a test can check a tool without a model or a key: the
// handler sees the agent's arguments, and the agent answers with the
// tool's result.
func ExampleAgent_goTool() {
	type weatherIn struct {
		City string `json:"city"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "forecast", Description: "The forecast of a city."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in weatherIn) (*mcp.CallToolResult, any, error) {
			fmt.Println("forecast for", in.City)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Sunny in " + in.City + "."}}}, nil, nil
		})
	agent := invokertest.Agent{CLI: "codex", CallTool: "weather/forecast", ToolArgs: map[string]any{"city": "Lisbon"}}
	res, err := codex.New(agent.Options()).Invoke(context.Background(), invoker.Request{
		Prompt:     "What is the weather in Lisbon?",
		Workdir:    os.TempDir(),
		MCPServers: []invoker.MCPServer{{Name: "weather", Server: srv}},
	})
	fmt.Println(res.Text, err)
	// Output:
	// forecast for Lisbon
	// Sunny in Lisbon. <nil>
}
