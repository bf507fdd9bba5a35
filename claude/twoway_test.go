package claude

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func approveAll(context.Context, invoker.Approval) invoker.Decision {
	return invoker.Decision{Allow: true}
}

func TestSessionCommandTwoWay(t *testing.T) {
	head := []string{"--print", "--output-format=stream-json", "--verbose", "--input-format=stream-json", "--replay-user-messages"}
	ro := []string{"--permission-mode=default", "--disallowedTools=Edit,Write,NotebookEdit", "--setting-sources="}
	goServer := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	tests := []struct {
		name    string
		req     invoker.SessionRequest
		want    []string
		wantEnv []string
	}{
		{"approve read-only keeps the read-only flags",
			invoker.SessionRequest{Workdir: "/w", Approve: approveAll},
			slices.Concat(head, ro, []string{"--permission-prompt-tool=stdio"}), nil},
		{"approve workspace-write asks in mode default",
			invoker.SessionRequest{Workdir: "/w", Permission: invoker.WorkspaceWrite, Approve: approveAll},
			slices.Concat(head, []string{"--permission-mode=default", "--permission-prompt-tool=stdio"}), nil},
		{"approve unlimited never bypasses",
			invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll, ExtraArgs: []string{"--debug"}},
			slices.Concat(head, []string{"--permission-mode=default", "--permission-prompt-tool=stdio", "--debug"}), nil},
		{"go servers inline and pre-allowed",
			invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, ExtraArgs: []string{"--debug"},
				MCPServers: []invoker.MCPServer{{Name: "tools", Server: goServer}, {Name: "more_2", Server: goServer}}},
			slices.Concat(head, []string{"--permission-mode=bypassPermissions",
				`--mcp-config={"mcpServers":{"more_2":{"type":"sdk","name":"more_2"},"tools":{"type":"sdk","name":"tools"}}}`,
				"--allowedTools=mcp__tools,mcp__more_2", "--debug"}), []string{"IS_SANDBOX=1"}},
		{"go servers with approve are asked about",
			invoker.SessionRequest{Workdir: "/w", Approve: approveAll,
				MCPServers: []invoker.MCPServer{{Name: "tools", Server: goServer}}},
			slices.Concat(head, ro, []string{`--mcp-config={"mcpServers":{"tools":{"type":"sdk","name":"tools"}}}`,
				"--permission-prompt-tool=stdio"}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := backend{}.SessionCommand(&tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cmd.Args, tt.want) {
				t.Errorf("Args =\n  %q\nwant\n  %q", cmd.Args, tt.want)
			}
			if !slices.Equal(cmd.Env, tt.wantEnv) {
				t.Errorf("Env = %q, want %q", cmd.Env, tt.wantEnv)
			}
			if cmd.Cleanup != nil {
				t.Error("Cleanup set without a configuration file")
			}
		})
	}
}

// TestMCPConfigFile checks that servers of other programs go to a file
// only the user reads, which Cleanup removes, and that no secret is on the
// command line.
func TestMCPConfigFile(t *testing.T) {
	req := invoker.SessionRequest{Workdir: "/w", Permission: invoker.WorkspaceWrite, MCPServers: []invoker.MCPServer{
		{Name: "files", Command: "files-mcp", Args: []string{"--root", "/a dir"}, Env: []string{"TOKEN=s3cret-env", "EMPTY="}},
		{Name: "web", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret-hdr"}},
		{Name: "go", Server: mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)},
	}}
	cmd, err := backend{}.SessionCommand(&req)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Cleanup == nil {
		t.Fatal("no Cleanup for the configuration file")
	}
	defer cmd.Cleanup()
	var path string
	for _, a := range cmd.Args {
		if strings.Contains(a, "s3cret") {
			t.Errorf("a secret is on the command line: %q", a)
		}
		if p, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			path = p
		}
	}
	if !slices.Contains(cmd.Args, "--allowedTools=mcp__files,mcp__web,mcp__go") {
		t.Errorf("Args = %q, want the servers' tools pre-allowed", cmd.Args)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("--mcp-config=%s: %v", path, err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of %s = %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers":{"files":{"args":["--root","/a dir"],"command":"files-mcp","env":{"EMPTY":"","TOKEN":"s3cret-env"},"type":"stdio"},"go":{"name":"go","type":"sdk"},"web":{"headers":{"Authorization":"Bearer s3cret-hdr"},"type":"http","url":"https://example.com/mcp"}}}`
	if g, _ := json.Marshal(got); string(g) != want {
		t.Errorf("configuration =\n  %s\nwant\n  %s", g, want)
	}
	cmd.Cleanup()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the configuration file is still there after Cleanup: %v", err)
	}
}

func TestMCPConfigErrors(t *testing.T) {
	for _, servers := range [][]invoker.MCPServer{
		{{Name: "a", Command: "x"}, {Name: "a", URL: "http://x"}},
		{{Name: "a"}},
		{{Name: "a", Command: "x", Env: []string{"s3cret-alone"}}},
		{{Name: "a", Command: "x", Env: []string{"=s3cret-unnamed"}}},
	} {
		req := invoker.SessionRequest{Workdir: "/w", MCPServers: servers}
		_, err := (backend{}).SessionCommand(&req)
		if !errors.Is(err, invoker.ErrInvalidRequest) {
			t.Errorf("SessionCommand(%+v) error = %v, want ErrInvalidRequest", servers, err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("SessionCommand() error = %q quotes an Env entry's value", err)
		}
	}
}

// canUse returns a can_use_tool control request for tool with input.
func canUse(id, tool, input string) []byte {
	return []byte(`{"type":"control_request","request_id":"` + id + `","request":{"subtype":"can_use_tool","tool_name":"` + tool +
		`","input":` + input + `,"permission_suggestions":[],"blocked_path":"/w/made","tool_use_id":"toolu_1"}}`)
}

// answerOf decodes a control_response line into request id and response.
func answerOf(t *testing.T, line []byte) (id string, resp map[string]any) {
	t.Helper()
	var v struct {
		Type     string `json:"type"`
		Response struct {
			Subtype   string         `json:"subtype"`
			RequestID string         `json:"request_id"`
			Response  map[string]any `json:"response"`
		} `json:"response"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Type != "control_response" || v.Response.Subtype != "success" {
		t.Fatalf("not a control_response of success: %s (%v)", line, err)
	}
	return v.Response.RequestID, v.Response.Response
}

// withMCP returns a with the names of its MCP tool.
func withMCP(a invoker.Approval, server, tool string) invoker.Approval {
	a.MCP.Server, a.MCP.Tool = server, tool
	return a
}

func TestCanUseTool(t *testing.T) {
	bash := `{"command":"touch made","description":"d"}`
	edit := func(path string) string { return `{"file_path":"` + path + `","old_string":"a","new_string":"b"}` }
	goServer := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(goServer, &mcp.Tool{Name: "greet"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	tests := []struct {
		name       string
		permission invoker.Permission
		noApprove  bool
		tool       string
		input      string
		// deny, when not empty, is a part of the message of the denial the
		// protocol answers with at once; otherwise the request goes to the
		// callback as want.
		deny string
		want invoker.Approval
	}{
		{name: "no callback denies at once", permission: invoker.Unlimited, noApprove: true, tool: "Bash", input: bash, deny: "no approval callback"},
		{name: "read-only denies a command", tool: "Bash", input: bash, deny: `above the permission level read-only`},
		{name: "read-only denies an edit", tool: "Write", input: edit("/w/a"), deny: "read-only"},
		{name: "read-only denies another server's tool", tool: "mcp__other__x", input: `{}`, deny: "read-only"},
		{name: "read-only asks about a read", tool: "Read", input: `{"file_path":"/etc/hosts"}`,
			want: invoker.Approval{Kind: "tool", Paths: []string{"/w/made"}}},
		{name: "read-only asks about its own server's tool", tool: "mcp__tools__greet", input: `{"who":"bob"}`,
			want: withMCP(invoker.Approval{Kind: "mcp_tool", Paths: []string{"/w/made"}}, "tools", "greet")},
		// A tool the Go server tools does not have: another server's
		// (a server tools__admin of Claude Code's settings, say).
		{name: "read-only denies a tool its Go server does not have", tool: "mcp__tools__admin__drop", input: `{}`, deny: "read-only"},
		{name: "unlimited asks about a tool its Go server does not have, naming no server", permission: invoker.Unlimited, tool: "mcp__tools__admin__drop", input: `{}`,
			want: invoker.Approval{Kind: "mcp_tool", Paths: []string{"/w/made"}}},
		{name: "workspace-write denies a command", permission: invoker.WorkspaceWrite, tool: "Bash", input: bash, deny: "workspace-write"},
		{name: "workspace-write asks about an edit inside", permission: invoker.WorkspaceWrite, tool: "Edit", input: edit("/w/sub/a.go"),
			want: invoker.Approval{Kind: "file_change", Paths: []string{"/w/sub/a.go", "/w/made"}}},
		{name: "workspace-write asks about a relative edit", permission: invoker.WorkspaceWrite, tool: "Write", input: edit("a.go"),
			want: invoker.Approval{Kind: "file_change", Paths: []string{"/w/a.go", "/w/made"}}},
		{name: "workspace-write denies an edit outside", permission: invoker.WorkspaceWrite, tool: "Edit", input: edit("/etc/passwd"), deny: "outside the working directory"},
		{name: "workspace-write denies an edit of a sibling", permission: invoker.WorkspaceWrite, tool: "Edit", input: edit("/wx/a"), deny: "outside the working directory"},
		{name: "unlimited asks about a command", permission: invoker.Unlimited, tool: "Bash", input: bash,
			want: invoker.Approval{Kind: "command", Command: "touch made", Paths: []string{"/w/made"}}},
		{name: "unlimited asks about another tool", permission: invoker.Unlimited, tool: "Task", input: `{}`,
			want: invoker.Approval{Kind: "tool", Paths: []string{"/w/made"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := invoker.SessionRequest{Workdir: "/w", Permission: tt.permission, Approve: approveAll,
				MCPServers: []invoker.MCPServer{{Name: "tools", Server: goServer}}}
			if tt.noApprove {
				req.Approve = nil
			}
			p := backend{}.NewSessionProtocol(&req)
			line := canUse("r1", tt.tool, tt.input)
			st, err := p.Decode(line)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindRaw {
				t.Errorf("Events = %+v, want the request as one raw event", st.Events)
			}
			if tt.deny != "" {
				if len(st.Approvals) != 0 || len(st.Write) != 1 {
					t.Fatalf("Step = %+v, want one answer and no approval", st)
				}
				id, resp := answerOf(t, st.Write[0])
				msg, _ := resp["message"].(string)
				if id != "r1" || resp["behavior"] != "deny" || !strings.Contains(msg, tt.deny) {
					t.Errorf("answer = %s, want a denial of r1 saying %q", st.Write[0], tt.deny)
				}
				return
			}
			if len(st.Write) != 0 || len(st.Approvals) != 1 {
				t.Fatalf("Step = %+v, want one approval and no answer", st)
			}
			a := st.Approvals[0].Request
			want := tt.want
			want.Tool = invoker.Tool{Name: tt.tool, ID: "toolu_1", Input: json.RawMessage(tt.input)}
			want.Raw = line
			if a.Kind != want.Kind || a.MCP != want.MCP || a.Command != want.Command || !slices.Equal(a.Paths, want.Paths) ||
				a.Tool.Name != want.Tool.Name || a.Tool.ID != want.Tool.ID || string(a.Tool.Input) != string(want.Tool.Input) ||
				string(a.Raw) != string(want.Raw) {
				t.Errorf("Approval =\n  %+v\nwant\n  %+v", a, want)
			}
		})
	}
}

func TestApprovalAnswers(t *testing.T) {
	orig := `{"command":"touch made"}`
	tests := []struct {
		name string
		d    invoker.Decision
		want map[string]any
	}{
		{"allow runs the input", invoker.Decision{Allow: true},
			map[string]any{"behavior": "allow", "updatedInput": map[string]any{"command": "touch made"}}},
		{"allow with a changed input", invoker.Decision{Allow: true, Input: json.RawMessage(`{"command":"touch other"}`)},
			map[string]any{"behavior": "allow", "updatedInput": map[string]any{"command": "touch other"}}},
		{"a changed input that is no object is denied", invoker.Decision{Allow: true, Input: json.RawMessage(`["x"]`)},
			map[string]any{"behavior": "deny", "message": "Permission to use Bash was denied: the changed input the program gave is not a JSON object."}},
		{"deny with a message", invoker.Decision{Message: "not today"},
			map[string]any{"behavior": "deny", "message": "not today"}},
		{"zero decision denies", invoker.Decision{},
			map[string]any{"behavior": "deny", "message": "Permission to use Bash was denied."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll})
			st, _ := p.Decode(canUse("r7", "Bash", orig))
			if len(st.Approvals) != 1 {
				t.Fatalf("Step = %+v, want an approval", st)
			}
			lines := st.Approvals[0].Answer(tt.d)
			if len(lines) != 1 {
				t.Fatalf("Answer() = %q, want one line", lines)
			}
			id, resp := answerOf(t, lines[0])
			if g, w := mustJSON(resp), mustJSON(tt.want); id != "r7" || g != w {
				t.Errorf("answer of %s = %s, want %s", id, g, w)
			}
			if again := st.Approvals[0].Cancel(); again != nil {
				t.Errorf("Cancel() after Answer = %q, want nothing", again)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestApprovalWithdrawn checks that a request Claude Code withdrew (the
// turn was interrupted) is not answered, and that one the turn left
// undecided is denied.
func TestApprovalWithdrawn(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll})
	st1, _ := p.Decode(canUse("r1", "Bash", `{"command":"a"}`))
	st2, _ := p.Decode(canUse("r2", "Bash", `{"command":"b"}`))
	st, err := p.Decode([]byte(`{"type":"control_cancel_request","request_id":"r1"}`))
	if err != nil || len(st.Write) != 0 || len(st.Events) != 1 || st.Events[0].Kind != invoker.KindRaw {
		t.Errorf("control_cancel_request: Step = %+v, %v; want one raw event", st, err)
	}
	if lines := st1.Approvals[0].Answer(invoker.Decision{Allow: true}); lines != nil {
		t.Errorf("Answer() of a withdrawn request = %q, want nothing", lines)
	}
	lines := st2.Approvals[0].Cancel()
	if len(lines) != 1 {
		t.Fatalf("Cancel() = %q, want a denial", lines)
	}
	if id, resp := answerOf(t, lines[0]); id != "r2" || resp["behavior"] != "deny" {
		t.Errorf("Cancel() = %s, want a denial of r2", lines[0])
	}
}

// TestApprovalForSession checks that an allow for the session answers the
// next request for the same tool without asking, within the ceiling, which
// a turn may lower without a set_permission_mode.
func TestApprovalForSession(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll})
	st, _ := p.Decode(canUse("r1", "Bash", `{"command":"a"}`))
	st.Approvals[0].Answer(invoker.Decision{Allow: true, ForSession: true})
	st, _ = p.Decode(canUse("r2", "Bash", `{"command":"b"}`))
	if len(st.Approvals) != 0 || len(st.Write) != 1 {
		t.Fatalf("second Bash: Step = %+v, want an answer without asking", st)
	}
	if _, resp := answerOf(t, st.Write[0]); mustJSON(resp) != `{"behavior":"allow","updatedInput":{"command":"b"}}` {
		t.Errorf("second Bash answered %s", st.Write[0])
	}
	if st, _ := p.Decode(canUse("r3", "Task", `{}`)); len(st.Approvals) != 1 {
		t.Errorf("another tool: Step = %+v, want it asked about", st)
	}
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "x", Permission: invoker.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || strings.Contains(string(lines[0]), "set_permission_mode") {
		t.Errorf("StartTurn() = %q, want only the prompt: the mode stays default", lines)
	}
	st, _ = p.Decode(canUse("r4", "Bash", `{"command":"c"}`))
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), "read-only") {
		t.Errorf("Bash after lowering to read-only: Step = %+v, want a denial naming the level", st)
	}
}

func TestMCPMessage(t *testing.T) {
	goServer := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w",
		MCPServers: []invoker.MCPServer{{Name: "tools", Server: goServer}, {Name: "ext", Command: "x"}}})
	call := func(id, server, msg string) driver.Step {
		t.Helper()
		st, err := p.Decode([]byte(`{"type":"control_request","request_id":"` + id + `","request":{"subtype":"mcp_message","server_name":"` +
			server + `","message":` + msg + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	reply := func(line []byte) string {
		t.Helper()
		_, resp := answerOf(t, line)
		return mustJSON(resp)
	}
	msg := `{"method":"tools/call","params":{"name":"greet","arguments":{"who":"bob"}},"jsonrpc":"2.0","id":2}`
	st := call("m1", "tools", msg)
	if len(st.Write) != 0 || len(st.Calls) != 1 || st.Calls[0].Server != "tools" || string(st.Calls[0].Message) != msg {
		t.Fatalf("Step = %+v, want the message as a call of tools", st)
	}
	tests := []struct {
		name  string
		reply []byte
		err   error
		want  string
	}{
		{"reply", []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`), nil,
			`{"mcp_response":{"id":2,"jsonrpc":"2.0","result":{"content":[]}}}`},
		{"error", nil, errors.New("closed"),
			`{"mcp_response":{"error":{"code":-32603,"message":"closed"},"id":2,"jsonrpc":"2.0"}}`},
		{"not JSON", []byte(`{`), nil,
			`{"mcp_response":{"error":{"code":-32603,"message":"the server's reply is not JSON"},"id":2,"jsonrpc":"2.0"}}`},
	}
	for _, tt := range tests {
		lines := st.Calls[0].Answer(tt.reply, tt.err)
		if len(lines) != 1 {
			t.Fatalf("%s: Answer() = %q", tt.name, lines)
		}
		if got := reply(lines[0]); got != tt.want {
			t.Errorf("%s: answer = %s, want %s", tt.name, got, tt.want)
		}
	}
	// A notification is acknowledged.
	st = call("m2", "tools", `{"method":"notifications/initialized","jsonrpc":"2.0"}`)
	if got := reply(st.Calls[0].Answer(nil, nil)[0]); got != `{"mcp_response":{"jsonrpc":"2.0","result":{}}}` {
		t.Errorf("notification answered %s", got)
	}
	// A server that is not a Go server of the request is answered at once.
	for _, server := range []string{"ext", "nope"} {
		st = call("m3", server, `{"method":"tools/list","jsonrpc":"2.0","id":5}`)
		if len(st.Calls) != 0 || len(st.Write) != 1 {
			t.Fatalf("%s: Step = %+v, want an answer at once", server, st)
		}
		if got := reply(st.Write[0]); !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, `"id":5`) {
			t.Errorf("%s: answered %s, want a JSON-RPC error for id 5", server, got)
		}
	}
}
