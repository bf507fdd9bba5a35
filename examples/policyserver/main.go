// Command policyserver is a whole MCP server, small enough to copy: it lets
// an assistant (Claude Desktop, Claude Code, Codex...) hand tasks to Claude
// Code or Codex, within an approval policy written in Go, and gives the
// agents one tool written in Go.
//
// The policy: an agent may change files under -folder only, and may not
// run rm; whatever else it asks is allowed, within the permission level of
// the call (workspace-write at most: the agent writes in its workdir, and
// its CLI's sandbox holds it there). At that level Codex asks about its
// commands, so the rm rule is the policy's; Claude Code's commands (its
// Bash tool) are above workspace-write and refused before the policy is
// asked. A server that lets the policy judge Claude Code's commands too
// serves at unlimited, where the policy is the only gate (docs/approvals.md).
// The tool: tickets/create, with which
// an agent files a ticket for work it leaves undone; the server logs it.
//
// Run it over stdio from an MCP host, for example Claude Code:
//
//	go build -o policyserver ./examples/policyserver
//	claude mcp add policy -- $PWD/policyserver -root ~/src/app -folder ~/src/app/docs
//
// It needs the claude and codex CLIs on PATH, logged in. Its tests need
// neither: go test ./examples/policyserver runs scripted stand-ins of the
// CLIs (invokertest.Agent) through the same server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

func main() {
	root := flag.String("root", ".", "the directory under which the agents' workdirs must lie")
	folder := flag.String("folder", "", "the only directory whose files the agents may change (default: -root)")
	flag.Parse()
	if *folder == "" {
		*folder = *root
	}
	// Logs go to stderr: over stdio, stdout is the protocol's.
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*root, *folder, logger); err != nil {
		logger.Error("policyserver", "error", err)
		os.Exit(1)
	}
}

// run serves over stdio until standard input ends or a signal comes.
func run(root, folder string, logger *slog.Logger) error {
	server, tools, err := newServer(root, folder, logger, claude.New(), codex.New())
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The SDK's Run waits for the calls in flight: Shutdown cancels them
	// first, and returns once each run's process tree is reaped.
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		stopped <- tools.Shutdown(context.Background())
	}()
	err = server.Run(ctx, &mcp.StdioTransport{})
	stop()
	if serr := <-stopped; err == nil {
		err = serr
	}
	return err
}

// newServer returns the server: one tool per invoker (and its parallel
// twin), confined to root, under the policy of folder, with the tickets
// tool. Tests give it scripted invokers.
func newServer(root, folder string, logger *slog.Logger, invokers ...invoker.Invoker) (*mcp.Server, *mcpadapter.Tools, error) {
	folder = resolve(folder)
	if fi, err := os.Stat(folder); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("the folder %s is not an existing directory", folder)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "policyserver", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		Roots:             []string{root},
		DefaultPermission: invoker.WorkspaceWrite,
		MaxPermission:     invoker.WorkspaceWrite,
		Approve:           policy(folder),
		MCPServers:        []invoker.MCPServer{{Name: "tickets", Server: ticketServer(logger)}},
		Logger:            logger,
	}, invokers...)
	return server, tools, err
}

// policy returns the approval policy: file changes under folder only, no
// rm; the rest goes to Options.Approvals, which allows it by default.
func policy(folder string) func(context.Context, *mcpadapter.Call, invoker.Approval) invoker.Decision {
	return func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
		switch a.Kind {
		case invoker.ApprovalFileChange:
			for _, p := range a.Paths {
				if !inside(folder, p) {
					return invoker.Decision{Message: fmt.Sprintf("%s is outside %s: only files under it may change", p, folder)}
				}
			}
			if len(a.Paths) == 0 {
				return invoker.Decision{Message: "say which files the change touches"}
			}
		case invoker.ApprovalCommand:
			if runsRm(a.Command) {
				return invoker.Decision{Message: "rm is not allowed here: leave the file, and file a ticket with tickets/create"}
			}
		}
		return call.Defer(ctx, a)
	}
}

// inside reports whether path lies under dir. The CLIs give absolute
// paths; a relative one is refused.
func inside(dir, path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	rel, err := filepath.Rel(dir, resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolve returns the absolute path with its symbolic links evaluated, as
// far as it exists (a file to be created does not, yet), so that a link
// cannot lead a change out of the folder.
func resolve(path string) string {
	path, _ = filepath.Abs(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	if parent := filepath.Dir(path); parent != path {
		return filepath.Join(resolve(parent), filepath.Base(path))
	}
	return path
}

// runsRm reports whether a shell command runs rm, as a word of its own
// (rm, /bin/rm, xargs rm, bash -lc 'rm x'): a policy by words, not a shell
// parser.
func runsRm(command string) bool {
	for _, w := range strings.FieldsFunc(command, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()`$'\"", r) }) {
		if filepath.Base(w) == "rm" {
			return true
		}
	}
	return false
}

// A ticket is the input of tickets/create.
type ticket struct {
	Title string `json:"title" jsonschema:"what is left to do, in one line"`
	Body  string `json:"body,omitempty" jsonschema:"details: files, reasons, what was tried"`
}

// ticketServer returns a Go MCP server with one tool, create, which files
// a ticket: here, a numbered line in the server's log.
func ticketServer(logger *slog.Logger) *mcp.Server {
	var filed atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "create", Description: "Files a ticket for work left undone."},
		func(ctx context.Context, _ *mcp.CallToolRequest, t ticket) (*mcp.CallToolResult, any, error) {
			if strings.TrimSpace(t.Title) == "" {
				return nil, nil, fmt.Errorf("a ticket needs a title")
			}
			n := filed.Add(1)
			logger.InfoContext(ctx, "ticket filed", "number", n, "title", t.Title, "body", t.Body)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Filed ticket #%d: %s", n, t.Title)}}}, nil, nil
		})
	return s
}
