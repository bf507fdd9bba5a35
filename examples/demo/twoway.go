package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// What the two-way part of the demo has the agent do, and what its
// Approve callback answers.
const (
	askFile     = "NOTES.md"
	askCommand  = "touch " + askFile
	denyMessage = "keep notes in the ticket, not in the repository"
)

// ticketIn is the input of the Go tool tickets/create.
type ticketIn struct {
	Title    string `json:"title"`
	Priority string `json:"priority"`
}

// ticketServer returns a go-sdk MCP server with one tool, tickets/create,
// whose handler prints the arguments the agent called it with.
func ticketServer(out io.Writer) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create", Description: "Files a ticket."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ticketIn) (*mcp.CallToolResult, any, error) {
			fmt.Fprintf(out, "  Go tool handler: tickets/create called with title=%q priority=%q\n", in.Title, in.Priority)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Filed ticket #42: " + in.Title + "."}}}, nil, nil
		})
	return srv
}

// twoWay shows Request.Approve and Request.MCPServers: in two runs of a
// fake agent in a temporary workdir, the agent asks to run a command that
// creates a file; the callback denies the first and allows the second,
// which also calls a Go tool. It returns an error when something did not
// happen as shown: the denial not reaching the agent, the file there
// after the denial or missing after the allow, the tool not called.
func twoWay(out io.Writer, cli string, newInvoker func(...invoker.Options) invoker.Invoker, exe string) error {
	workdir, err := os.MkdirTemp("", "clinvoke-demo-workdir-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workdir)
	file := filepath.Join(workdir, askFile)
	inv := newInvoker(invoker.Options{Binary: exe})
	tools := ticketServer(out)

	fmt.Fprintf(out, "Two-way control: a fake %s agent asks before it acts, and calls a tool written in Go.\n", cli)
	run := func(allow bool, script fakeagent.Script, servers []invoker.MCPServer) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := inv.Invoke(ctx, invoker.Request{
			Prompt:  "Write down what you changed, and file a ticket for the rest.",
			Workdir: workdir,
			// The ceiling: nothing above it is even asked (Claude Code counts
			// any Bash command above WorkspaceWrite). With Approve, even
			// Unlimited asks about every action.
			Permission: invoker.Unlimited,
			Env:        script.Env(),
			MCPServers: servers,
			Approve: func(ctx context.Context, a invoker.Approval) invoker.Decision {
				fmt.Fprintf(out, "  Approve(%s)\n", showApproval(a, workdir))
				if !allow {
					fmt.Fprintf(out, "    -> deny: %q\n", denyMessage)
					return invoker.Decision{Message: denyMessage}
				}
				fmt.Fprintf(out, "    -> allow\n")
				return invoker.Decision{Allow: true}
			},
		})
		if err != nil {
			return "", err
		}
		return res.Text, nil
	}
	exists := func() bool { _, err := os.Stat(file); return err == nil }

	fmt.Fprintf(out, "\nRun 1: it asks to run %q in a temporary workdir; Approve denies.\n", askCommand)
	text, err := run(false, fakeagent.Script{Flavor: cli, Ask: askCommand}, nil)
	if err != nil {
		return fmt.Errorf("run 1: %w", err)
	}
	fmt.Fprintf(out, "  %s exists: %v\n", askFile, exists())
	fmt.Fprintf(out, "  the agent answered: %q\n", text)
	if !strings.Contains(text, denyMessage) {
		name := map[string]string{"codex": "Codex", "gemini": "Gemini CLI"}[cli]
		fmt.Fprintf(out, "  (%s's protocol carries no message with a denial; Claude Code's does)\n", name)
	}
	switch {
	case !strings.HasPrefix(text, fakeagent.OutcomeDenied):
		return fmt.Errorf("run 1: the agent did not hear the denial: %q", text)
	case exists():
		return fmt.Errorf("run 1: %s was created although the command was denied", askFile)
	}

	const toolArgs = `{"title":"Parser: one-pass rewrite","priority":"high"}`
	fmt.Fprintf(out, "\nRun 2: it asks again and Approve allows; then it calls the Go tool tickets/create.\n")
	text, err = run(true,
		fakeagent.Script{Flavor: cli, Ask: askCommand, CallTool: "tickets/create", ToolArgs: json.RawMessage(toolArgs)},
		[]invoker.MCPServer{{Name: "tickets", Server: tools}})
	if err != nil {
		return fmt.Errorf("run 2: %w", err)
	}
	fmt.Fprintf(out, "  %s exists: %v\n", askFile, exists())
	fmt.Fprintf(out, "  the agent answered: %q\n", text)
	switch {
	case !exists():
		return fmt.Errorf("run 2: %s is missing although the command was allowed", askFile)
	case !strings.HasPrefix(text, fakeagent.OutcomeApproved):
		return fmt.Errorf("run 2: the agent did not run the allowed command: %q", text)
	case !strings.Contains(text, "Filed ticket #42"):
		return errors.New("run 2: the answer does not carry the tool's result: " + text)
	}
	return nil
}

// showApproval prints the fields of a that are set, Raw left out, with
// the workdir shown as <workdir>.
func showApproval(a invoker.Approval, workdir string) string {
	fields := []string{"Kind: " + fmt.Sprintf("%q", a.Kind)}
	add := func(name, v string) {
		if v != "" {
			fields = append(fields, name+": "+fmt.Sprintf("%q", v))
		}
	}
	add("Command", a.Command)
	add("Tool.Name", a.Tool.Name)
	if len(a.Tool.Input) > 0 && a.Command == "" {
		fields = append(fields, "Tool.Input: "+truncate(string(a.Tool.Input), 60))
	}
	if a.Cwd == workdir {
		fields = append(fields, "Cwd: <workdir>")
	} else {
		add("Cwd", a.Cwd)
	}
	add("Reason", a.Reason)
	return strings.Join(fields, ", ")
}
