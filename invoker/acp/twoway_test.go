package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// envMCPEcho makes the test binary an MCP server on standard input and
// output with the tool "echo" (see TestMain), the external server of
// TestMCPServers.
const envMCPEcho = "CLINVOKE_ACP_TEST_MCPECHO"

// mcpEcho serves the tool "echo", which answers "echo: ", its text and
// the server's NODE_OPTIONS, on standard input and output until the
// client goes away.
func mcpEcho() {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpecho", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text + " node_options=" + os.Getenv("NODE_OPTIONS")}}}, nil, nil
		})
	s.Run(context.Background(), &mcp.StdioTransport{})
}

// asker is an Approve callback that records what it is asked and answers
// d.
type asker struct {
	d   invoker.Decision
	mu  sync.Mutex
	got []invoker.Approval
}

func (a *asker) approve(_ context.Context, ap invoker.Approval) invoker.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ap)
	return a.d
}

// TestApprovals checks, through the engine, which requests for permission
// reach the Approve callback, how they are described, and the option each
// decision selects.
func TestApprovals(t *testing.T) {
	t.Parallel()
	shell := map[string]any{"command": "touch x", "cwd": "/w"}
	for _, tc := range []struct {
		name  string
		perm  invoker.Permission
		kind  string
		input map[string]any
		d     invoker.Decision
		// want is the kind of the approval asked, "" for none; option
		// the option the agent saw.
		want, option string
	}{
		{"command allowed", invoker.Unlimited, "execute", shell, invoker.Decision{Allow: true}, "command", "allow"},
		{"command for the session", invoker.Unlimited, "execute", shell, invoker.Decision{Allow: true, ForSession: true}, "command", "always"},
		{"command denied", invoker.Unlimited, "execute", shell, invoker.Decision{Message: "no"}, "command", "reject"},
		{"command with a changed input", invoker.Unlimited, "execute", shell, invoker.Decision{Allow: true, Input: json.RawMessage(`{"command":"true"}`)}, "command", "reject"},
		{"command above the ceiling", invoker.WorkspaceWrite, "execute", shell, invoker.Decision{Allow: true}, "", "reject"},
		{"edit", invoker.WorkspaceWrite, "edit", nil, invoker.Decision{Allow: true}, "file_change", "allow"},
		{"edit above the ceiling", invoker.ReadOnly, "edit", nil, invoker.Decision{Allow: true}, "", "reject"},
		{"read", invoker.ReadOnly, "read", nil, invoker.Decision{Allow: true}, "tool", "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &asker{d: tc.d}
			r := invoke(t, fakeagent.Script{ACP: fakeagent.ACPOptions{Permission: tc.kind, PermissionTitle: "the call", PermissionInput: tc.input}, Answer: "done"},
				nil, invoker.Options{}, invoker.Request{Permission: tc.perm, Approve: a.approve})
			if r.err != nil {
				t.Fatalf("Invoke() error = %v", r.err)
			}
			if got, want := r.texts(invoker.KindReasoning), "permission "+tc.kind+": "+tc.option; !slices.Contains(got, want) {
				t.Errorf("the agent saw %q, want %q", got, want)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if tc.want == "" {
				if len(a.got) != 0 {
					t.Errorf("Approve was asked %+v, want nothing above the ceiling", a.got)
				}
				return
			}
			if len(a.got) != 1 {
				t.Fatalf("Approve was asked %d times, want once", len(a.got))
			}
			got := a.got[0]
			if got.Kind != tc.want || got.Tool.ID == "" || got.SessionID == "" || len(got.Raw) == 0 {
				t.Errorf("Approval = %+v, want kind %s with the call's id, the session and the request", got, tc.want)
			}
			if tc.want == "command" && (got.Command != "touch x" || got.Cwd != "/w") {
				t.Errorf("Approval command %q in %q, want touch x in /w", got.Command, got.Cwd)
			}
		})
	}
}

// TestApprovalCancelled checks that a turn cancelled while Approve waits
// ends with the context's error after Approve returned, the question
// withdrawn, and nothing left.
func TestApprovalCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var returned bool
	s := fakeagent.Script{Ask: "touch never"}
	r := invokeCtx(t, ctx, s, invoker.Request{Permission: invoker.Unlimited,
		Approve: func(actx context.Context, _ invoker.Approval) invoker.Decision {
			cancel()
			<-actx.Done()
			returned = true
			return invoker.Decision{Allow: true}
		}})
	if !errors.Is(r.err, context.Canceled) || !returned {
		t.Errorf("Invoke() error = %v (Approve returned %v), want context.Canceled after Approve returned", r.err, returned)
	}
}

// TestMCPServers checks the request's MCP servers: an external stdio
// server reached and trusted without a callback, asked about with one,
// and an HTTP server refused by an agent without mcpCapabilities.http.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	ext := []invoker.MCPServer{{Name: "ext", Command: os.Args[0], Env: []string{envMCPEcho + "=1"}}}
	call, args := "ext/echo", json.RawMessage(`{"text":"hi"}`)
	for _, tc := range []struct {
		name    string
		s       fakeagent.Script
		servers []invoker.MCPServer
		perm    invoker.Permission
		approve *asker
		wantErr error
		want    string // the start of the answer
		// notAsked: the level rejects the call without asking.
		notAsked bool
	}{
		{name: "trusted at read-only", s: fakeagent.Script{CallTool: call, ToolArgs: args, ACP: fakeagent.ACPOptions{AgentName: "gemini-cli"}}, servers: ext, perm: invoker.ReadOnly, want: "echo: hi"},
		{name: "asked with a callback", s: fakeagent.Script{CallTool: call, ToolArgs: args, ACP: fakeagent.ACPOptions{AgentName: "gemini-cli"}}, servers: ext, perm: invoker.ReadOnly,
			approve: &asker{d: invoker.Decision{Allow: true}}, want: "echo: hi"},
		// An agent that is not known to build its call ids from the
		// tool's name proves nothing by them, nor by the title: the
		// level judges the call.
		{name: "not proven: judged by the level", s: fakeagent.Script{CallTool: call, ToolArgs: args}, servers: ext, perm: invoker.ReadOnly, want: fakeagent.OutcomeDenied, notAsked: true},
		{name: "not proven: not asked", s: fakeagent.Script{CallTool: call, ToolArgs: args}, servers: ext, perm: invoker.ReadOnly,
			approve: &asker{d: invoker.Decision{Allow: true}}, want: fakeagent.OutcomeDenied, notAsked: true},
		{name: "not proven: allowed at unlimited", s: fakeagent.Script{CallTool: call, ToolArgs: args}, servers: ext, perm: invoker.Unlimited, want: "echo: hi"},
		{name: "denied by the callback", s: fakeagent.Script{CallTool: call, ToolArgs: args, ACP: fakeagent.ACPOptions{AgentName: "gemini-cli"}}, servers: ext, perm: invoker.Unlimited,
			approve: &asker{}, want: fakeagent.OutcomeDenied},
		{name: "HTTP without mcpCapabilities.http", s: fakeagent.Script{ACP: fakeagent.ACPOptions{NoMCPHTTP: true}},
			servers: []invoker.MCPServer{{Name: "web", URL: "http://127.0.0.1:9/mcp"}}, wantErr: invoker.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := invoker.Request{Permission: tc.perm, MCPServers: tc.servers}
			if tc.approve != nil {
				req.Approve = tc.approve.approve
			}
			r := invoke(t, tc.s, nil, invoker.Options{}, req)
			if !errors.Is(r.err, tc.wantErr) || (tc.wantErr == nil) != (r.err == nil) {
				t.Fatalf("Invoke() error = %v, want %v", r.err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if !strings.Contains(r.err.Error(), `"web"`) {
					t.Errorf("error %q does not name the server", r.err)
				}
				return
			}
			if !strings.HasPrefix(r.res.Text, tc.want) {
				t.Errorf("answer %q, want it to start with %q", r.res.Text, tc.want)
			}
			if a := tc.approve; a != nil && tc.notAsked && len(a.got) != 0 {
				t.Errorf("Approve was asked %v about a call the level rejects", a.got)
			}
			if a := tc.approve; a != nil && !tc.notAsked {
				a.mu.Lock()
				defer a.mu.Unlock()
				// The tool is named by its kind ("other"), as in its
				// events: the agent's own names are Gemini's business.
				if len(a.got) != 1 || a.got[0].Kind != "mcp_tool" || string(a.got[0].Tool.Input) != `{"text":"hi"}` {
					t.Errorf("Approve was asked %v, want one mcp_tool approval with the call's arguments", a.got)
				}
			}
		})
	}
}

// TestMCPServerNodeOptions: a stdio server of a run the kernel holds gets
// the inspector option after its own NODE_OPTIONS, also where only
// Options.Sandbox asks for the sandbox (the backend sees the sandbox the
// engine decided, not the request's); without the sandbox it gets its
// own alone. (The fake agent passes its environment on beneath the
// server's Env, as Gemini CLI does: the server's own NODE_OPTIONS
// replaced the run's there.)
func TestMCPServerNodeOptions(t *testing.T) {
	t.Parallel()
	if c := acp.New(fakeAgent(fakeagent.Script{})).Capabilities(); c.Sandbox == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Capabilities.Sandbox is empty (%s): CI runs on a kernel with Landlock", c.SandboxNote)
		}
		t.Skipf("no sandbox here: %s", c.SandboxNote)
	}
	ext := []invoker.MCPServer{{Name: "ext", Command: os.Args[0], Env: []string{envMCPEcho + "=1", "NODE_OPTIONS=--no-warnings"}}}
	s := fakeagent.Script{CallTool: "ext/echo", ToolArgs: json.RawMessage(`{"text":"hi"}`)}
	for _, tc := range []struct {
		name      string
		opts, req invoker.Sandbox
		want      string
	}{
		{"Options only", invoker.Sandbox{Mode: "required"}, invoker.Sandbox{}, "--no-warnings " + sandbox.NodeInspectorOff},
		{"request", invoker.Sandbox{}, invoker.Sandbox{Mode: "required"}, "--no-warnings " + sandbox.NodeInspectorOff},
		{"no sandbox", invoker.Sandbox{}, invoker.Sandbox{}, "--no-warnings"},
		{"off in the request", invoker.Sandbox{Mode: "required"}, invoker.Sandbox{Mode: "off"}, "--no-warnings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := quick
			opts.Sandbox = tc.opts
			r := invoke(t, s, nil, opts, invoker.Request{Permission: invoker.Unlimited, MCPServers: ext, Sandbox: tc.req})
			if r.err != nil {
				t.Fatalf("Invoke() error = %v; stderr: %s", r.err, r.res.Stderr)
			}
			if want := "echo: hi node_options=" + tc.want; !strings.HasPrefix(r.res.Text, want) || strings.HasPrefix(r.res.Text, want+" ") {
				t.Errorf("answer %q, want %q: the server's NODE_OPTIONS", r.res.Text, want)
			}
		})
	}
}

// TestTitleProvesNoServer checks that a shell command titled like a tool
// of the request's server (Gemini CLI titles a shell call with its command
// line) is judged by the level: at ReadOnly it does not run, and a
// callback is not asked.
func TestTitleProvesNoServer(t *testing.T) {
	t.Parallel()
	ext := []invoker.MCPServer{{Name: "tools", Command: os.Args[0], Env: []string{envMCPEcho + "=1"}}}
	for _, approve := range []bool{false, true} {
		dir := t.TempDir()
		file := filepath.Join(dir, "pwned")
		a := &asker{d: invoker.Decision{Allow: true}}
		req := invoker.Request{Workdir: dir, Permission: invoker.ReadOnly, MCPServers: ext}
		if approve {
			req.Approve = a.approve
		}
		r := invoke(t, fakeagent.Script{Ask: "touch " + file + " # (tools MCP Server)", ACP: fakeagent.ACPOptions{AgentName: "gemini-cli"}}, nil, invoker.Options{}, req)
		if r.err != nil {
			t.Fatalf("callback %v: Invoke() error = %v", approve, r.err)
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("callback %v: the command ran (stat: %v)", approve, err)
		}
		a.mu.Lock()
		if len(a.got) != 0 {
			t.Errorf("callback %v: Approve was asked about %q as %s", approve, a.got[0].Command, a.got[0].Kind)
		}
		a.mu.Unlock()
	}
}

// TestEditOutsideWorkspace checks that under WorkspaceWrite an edit through
// a link that leaves the working directory is rejected without asking, and
// the file is not written.
func TestEditOutsideWorkspace(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, approve := range []bool{false, true} {
		a := &asker{d: invoker.Decision{Allow: true}}
		req := invoker.Request{Workdir: dir, Permission: invoker.WorkspaceWrite}
		if approve {
			req.Approve = a.approve
		}
		r := invoke(t, fakeagent.Script{Edit: filepath.Join("link", "pwned.txt")}, nil, invoker.Options{}, req)
		if r.err != nil {
			t.Fatalf("callback %v: Invoke() error = %v", approve, r.err)
		}
		if _, err := os.Stat(filepath.Join(outside, "pwned.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("callback %v: the file outside was written (stat: %v); answer %q", approve, err, r.res.Text)
		}
		a.mu.Lock()
		if len(a.got) != 0 {
			t.Errorf("callback %v: Approve was asked about %v", approve, a.got[0].Paths)
		}
		a.mu.Unlock()
	}
}
