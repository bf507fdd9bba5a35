package main

// The server's tests run it with scripted stand-ins of Claude Code and
// Codex (invokertest.Agent: this test binary, started again as the CLI),
// through the real backends, over an in-memory MCP connection
// (mcptest): no CLI, no key, no network.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
	"github.com/clinvoke/clinvoke/mcpadapter/mcptest"
)

// TestMain hands the test binary over to the agent when it was started as
// one, and fails the run if a process an agent started outlives the tests.
func TestMain(m *testing.M) { invokertest.Main(m) }

var backends = map[string]func(...invoker.Options) invoker.Invoker{"claude": claude.New, "codex": codex.New}

// project is a workdir for a test, with the folder the policy lets the
// agents change.
type project struct{ root, folder string }

func newProject(t *testing.T) project {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := project{root: root, folder: filepath.Join(root, "docs")}
	if err := os.Mkdir(p.folder, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// connect serves inv under p's policy and connects a client. At the end of
// the test the client closes, the server stops, and no goroutine is left.
func connect(t *testing.T, p project, inv invoker.Invoker) *mcptest.Client {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // registered first, runs last
	server, tools, err := newServer(p.root, p.folder, slog.New(slog.NewTextHandler(io.Discard, nil)), inv)
	if err != nil {
		t.Fatal(err)
	}
	return mcptest.Connect(t, server, tools, nil)
}

// TestPolicy: an agent may change a file under the folder, not one
// elsewhere in its workdir, and may not run rm.
func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clis  []string          // the CLIs whose agents ask it
		agent invokertest.Agent // what the agent asks, relative to the workdir
		file  string            // the file it would change
		want  string            // the start of its answer
		says  string            // the policy's reason, in a denial that carries one (Claude Code's)
	}{
		{"edit inside", []string{"claude", "codex"}, invokertest.Agent{Edit: "docs/guide.md"}, "docs/guide.md", "edited", ""},
		{"edit outside", []string{"claude", "codex"}, invokertest.Agent{Edit: "main.go"}, "main.go", "denied", "main.go is outside"},
		{"edit through a link", []string{"claude", "codex"}, invokertest.Agent{Edit: "docs/link/main.go"}, "main.go", "denied", "main.go is outside"},
		// Codex runs commands in its sandbox and asks about them: the
		// policy refuses rm. Claude Code's Bash is above workspace-write
		// for the claude backend, which refuses every command without
		// asking the policy: the level's reason, not the policy's.
		{"rm", []string{"codex"}, invokertest.Agent{Ask: "rm -f go.sum"}, "go.sum", "denied", ""},
		{"rm above the level", []string{"claude"}, invokertest.Agent{Ask: "rm -f go.sum"}, "go.sum", "denied", "Bash is above the permission level workspace-write"},
		{"other command", []string{"codex"}, invokertest.Agent{Ask: "touch docs/a.txt"}, "docs/a.txt", "approved", ""},
	} {
		for _, cli := range tc.clis {
			t.Run(cli+"/"+tc.name, func(t *testing.T) {
				p := newProject(t)
				if err := os.Symlink(p.root, filepath.Join(p.folder, "link")); err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(p.root, tc.file)
				if strings.HasPrefix(tc.name, "rm") {
					if err := os.WriteFile(file, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				agent := tc.agent
				agent.CLI = cli
				c := connect(t, p, backends[cli](agent.Options()))
				out, err := c.Call(t.Context(), cli, mcpadapter.Input{Prompt: "Tidy up.", Workdir: p.root})
				if err != nil || out.Status != mcpadapter.StatusCompleted || !strings.HasPrefix(out.Text, tc.want) {
					t.Fatalf("Call() = %+v, %v; want an answer starting %q", out, err, tc.want)
				}
				if cli == "claude" && !strings.Contains(out.Text, tc.says) {
					t.Errorf("answer %q, want the policy's reason %q", out.Text, tc.says)
				}
				_, err = os.Stat(file)
				if exists, want := err == nil, tc.want != "denied" || strings.HasPrefix(tc.name, "rm"); exists != want {
					t.Errorf("%s exists: %v, want %v", tc.file, exists, want)
				}
			})
		}
	}
}

// TestTicketTool: the agent calls the Go tool, and reads its answer.
func TestTicketTool(t *testing.T) {
	for cli, newInvoker := range backends {
		t.Run(cli, func(t *testing.T) {
			agent := invokertest.Agent{CLI: cli, CallTool: "tickets/create",
				ToolArgs: map[string]any{"title": "Split the parser", "body": "parse.go is 2000 lines"}}
			p := newProject(t)
			c := connect(t, p, newInvoker(agent.Options()))
			out, err := c.Call(t.Context(), cli, mcpadapter.Input{Prompt: "Review the parser.", Workdir: p.root})
			if err != nil || !strings.Contains(out.Text, "Filed ticket #1: Split the parser") {
				t.Errorf("Call() = %+v, %v; want the tool's answer in the agent's", out, err)
			}
		})
	}
}

// TestCancel: a call cancelled while its agent works leaves no process
// behind, the agent's own included.
func TestCancel(t *testing.T) {
	for cli, newInvoker := range backends {
		t.Run(cli, func(t *testing.T) {
			agent := invokertest.Agent{CLI: cli, Answer: "Half an", Stall: time.Hour, LeaveBehind: true}
			inv := mcptest.NewInvoker(newInvoker(agent.Options()))
			p := newProject(t)
			c := connect(t, p, inv)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() {
				if _, err := inv.WaitStart(ctx); err == nil {
					cancel() // the agent is at work: cancel its call
				}
			}()
			_, err := c.Call(ctx, cli, mcpadapter.Input{Prompt: "Explain.", Workdir: p.root})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Call() error = %v, want context.Canceled", err)
			}
			if err := c.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if pids := invokertest.Survivors(); len(pids) > 0 {
				t.Errorf("processes alive once the call was reaped: %v", pids)
			}
		})
	}
}

func TestRunsRm(t *testing.T) {
	for cmd, want := range map[string]bool{
		"rm -rf build": true, "/bin/rm x": true, "find . | xargs rm": true, "make && rm a": true,
		"git rm --cached x": true, "/bin/bash -lc 'rm -f go.sum'": true, `sh -c "rm x"`: true, "ls": false, "npm run format": false, "echo rmdir": false,
	} {
		if got := runsRm(cmd); got != want {
			t.Errorf("runsRm(%q) = %v, want %v", cmd, got, want)
		}
	}
}
