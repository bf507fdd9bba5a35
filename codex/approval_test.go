package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

func allowAll(context.Context, invoker.Approval) invoker.Decision {
	return invoker.Decision{Allow: true}
}

// openTurn opens a session of req on the protocol and starts a turn U1 of
// thread T1, returning the protocol and the lines of the opening.
func openTurn(t *testing.T, req *invoker.SessionRequest) (driver.SessionProtocol, []byte) {
	t.Helper()
	p := backend{}.NewSessionProtocol(req)
	p.Open()
	st := appDecode(t, p, `{"id":1,"result":{}}`)
	open := st.Write[1]
	appDecode(t, p, `{"id":2,"result":{"thread":{"id":"T1"}}}`)
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	appDecode(t, p, `{"id":`+jsonInt(idOf(t, lines[0]))+`,"result":{"turn":{"id":"U1"}}}`)
	return p, open
}

// The opening asks Codex for its questions only when the program answers
// them, and keeps the sandbox as a permission profile then.
func TestApprovalPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  invoker.SessionRequest
		want []string // in the thread/start line
		not  []string
	}{
		{"no callback", invoker.SessionRequest{Workdir: "/w"}, []string{`"approvalPolicy":"never"`, `"sandbox":"read-only"`}, []string{`"permissions"`}},
		{"callback", invoker.SessionRequest{Workdir: "/w", Approve: allowAll}, []string{`"approvalPolicy":"untrusted"`, `"permissions":"clinvoke-read-only"`}, []string{`"sandbox"`}},
		{"callback, workspace", invoker.SessionRequest{Workdir: "/w", Approve: allowAll, Permission: invoker.WorkspaceWrite}, []string{`"permissions":"clinvoke-workspace-write"`}, nil},
		{"callback, unlimited", invoker.SessionRequest{Workdir: "/w", Approve: allowAll, Permission: invoker.Unlimited}, []string{`"permissions":":danger-full-access"`}, nil},
		{"callback, resume", invoker.SessionRequest{Workdir: "/w", Approve: allowAll, SessionID: "T0"}, []string{`"thread/resume"`, `"approvalPolicy":"untrusted"`}, []string{`"sandbox"`, `"permissions"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, open := openTurn(t, &tc.req)
			for _, w := range tc.want {
				if !strings.Contains(string(open), w) {
					t.Errorf("opening %s lacks %s", open, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(open), n) {
					t.Errorf("opening %s has %s", open, n)
				}
			}
		})
	}
}

// A turn's switch of permission keeps the callback's policy and profile.
func TestApprovalSwitchPermission(t *testing.T) {
	for _, tc := range []struct {
		approve bool
		want    []string
	}{
		{false, []string{`"approvalPolicy":"never"`, `"sandboxPolicy":{`, `"type":"workspaceWrite"`}},
		{true, []string{`"approvalPolicy":"untrusted"`, `"permissions":"clinvoke-workspace-write"`}},
	} {
		req := &invoker.SessionRequest{Workdir: "/w"}
		if tc.approve {
			req.Approve = allowAll
		}
		p, _ := openTurn(t, req)
		appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`)
		lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "more", Permission: invoker.WorkspaceWrite})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(lines[0]), w) {
				t.Errorf("approve %v: turn/start %s lacks %s", tc.approve, lines[0], w)
			}
		}
	}
}

// Each question of Codex's becomes an Approval with what Codex said of the
// action, and each Decision the answer Codex understands.
func TestApprovalRequests(t *testing.T) {
	const (
		cmdReq  = `{"method":"item/commandExecution/requestApproval","id":7,"params":{"kind":"command","threadId":"T1","turnId":"U1","itemId":"call_1","command":"/bin/bash -lc 'touch x'","cwd":"/w","reason":"needs write"}}`
		fileReq = `{"method":"item/fileChange/requestApproval","id":8,"params":{"threadId":"T1","turnId":"U1","itemId":"call_2"}}`
		mcpReq  = `{"method":"mcpServer/elicitation/request","id":9,"params":{"threadId":"T1","turnId":"U1","serverName":"echo","mode":"form","_meta":{"codex_approval_kind":"mcp_tool_call","persist":["session","always"],"tool_name":"say","tool_params":{"text":"hi"}},"message":"Allow the echo MCP server to run tool \"say\"?","requestedSchema":{"type":"object","properties":{}}}}`
	)
	mcpApproval := invoker.Approval{Kind: "mcp_tool", Workdir: "/w", Reason: `Allow the echo MCP server to run tool "say"?`,
		Tool: invoker.Tool{Name: "mcp__echo__say", ID: "call_3", Input: json.RawMessage(`{"text":"hi"}`)}}
	mcpApproval.MCP.Server, mcpApproval.MCP.Tool = "echo", "say"
	before := map[string]string{
		fileReq: `{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"fileChange","id":"call_2","status":"inProgress","changes":[{"path":"/w/a.txt","kind":{"type":"add"},"diff":"x"},{"path":"/w/b.txt","kind":{"type":"update"},"diff":"y"}]}}}`,
		mcpReq:  `{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"mcpToolCall","id":"call_3","server":"echo","tool":"say","status":"inProgress","arguments":{"text":"hi"}}}}`,
	}
	for _, tc := range []struct {
		name     string
		line     string
		want     invoker.Approval // Raw and SessionID are checked apart
		decision invoker.Decision
		answer   string
	}{
		{"command allowed", cmdReq, invoker.Approval{Kind: "command", Command: "/bin/bash -lc 'touch x'", Cwd: "/w", Workdir: "/w", Reason: "needs write",
			Tool: invoker.Tool{Name: "command_execution", ID: "call_1", Input: json.RawMessage(`{"command":"/bin/bash -lc 'touch x'"}`)}},
			invoker.Decision{Allow: true}, `{"id":7,"jsonrpc":"2.0","result":{"decision":"accept"}}`},
		{"command for the session", cmdReq, invoker.Approval{}, invoker.Decision{Allow: true, ForSession: true}, `{"id":7,"jsonrpc":"2.0","result":{"decision":"acceptForSession"}}`},
		{"command denied", cmdReq, invoker.Approval{}, invoker.Decision{Message: "no"}, `{"id":7,"jsonrpc":"2.0","result":{"decision":"decline"}}`},
		{"command with a changed input", cmdReq, invoker.Approval{}, invoker.Decision{Allow: true, Input: json.RawMessage(`{"command":"ls"}`)}, `{"id":7,"jsonrpc":"2.0","result":{"decision":"decline"}}`},
		{"file change", fileReq, invoker.Approval{Kind: "file_change", Paths: []string{"/w/a.txt", "/w/b.txt"}, Workdir: "/w",
			Tool: invoker.Tool{Name: "file_change", ID: "call_2", Input: json.RawMessage(`{"changes":[{"path":"/w/a.txt","kind":{"type":"add"},"diff":"x"},{"path":"/w/b.txt","kind":{"type":"update"},"diff":"y"}]}`)}},
			invoker.Decision{Allow: true}, `{"id":8,"jsonrpc":"2.0","result":{"decision":"accept"}}`},
		{"mcp tool", mcpReq, mcpApproval, invoker.Decision{Allow: true}, `{"id":9,"jsonrpc":"2.0","result":{"_meta":null,"action":"accept","content":{}}}`},
		{"mcp tool for the session", mcpReq, invoker.Approval{}, invoker.Decision{Allow: true, ForSession: true},
			`{"id":9,"jsonrpc":"2.0","result":{"_meta":{"persist":"session"},"action":"accept","content":{}}}`},
		{"mcp tool denied", mcpReq, invoker.Approval{}, invoker.Decision{}, `{"id":9,"jsonrpc":"2.0","result":{"_meta":null,"action":"decline","content":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// At WorkspaceWrite, with the server echo the request's: a
			// file change in /w and the server's tool are within the
			// level (ceiling_test.go has those that are not).
			p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Permission: invoker.WorkspaceWrite, Approve: allowAll,
				MCPServers: []invoker.MCPServer{{Name: "echo", Command: "mcpecho"}}})
			if b := before[tc.line]; b != "" {
				appDecode(t, p, b)
			}
			st := appDecode(t, p, tc.line)
			if len(st.Write) != 0 || len(st.Approvals) != 1 {
				t.Fatalf("Step = %+v, want one Approval and nothing written", st)
			}
			a := st.Approvals[0]
			if a.Request.SessionID != "T1" || string(a.Request.Raw) != tc.line {
				t.Errorf("Approval session %q, raw %s; want T1 and the request", a.Request.SessionID, a.Request.Raw)
			}
			if tc.want.Kind != "" {
				got := a.Request
				got.SessionID, got.Raw = "", nil
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Approval = %+v\nwant %+v", got, tc.want)
				}
			}
			if out := a.Answer(tc.decision); len(out) != 1 || string(out[0]) != tc.answer {
				t.Errorf("Answer(%+v) = %q, want %s", tc.decision, out, tc.answer)
			}
		})
	}
}

// Without a callback, and for what is not an approval, Codex's requests
// are answered at once.
func TestApprovalAnsweredAtOnce(t *testing.T) {
	trusted := []invoker.MCPServer{{Name: "echo", Command: "mcpecho"}}
	for _, tc := range []struct {
		name    string
		approve bool
		line    string
		answer  string
	}{
		{"command, no callback", false, `{"method":"item/commandExecution/requestApproval","id":1,"params":{"itemId":"c"}}`, `"result":{"decision":"decline"}`},
		{"file change, no callback", false, `{"method":"item/fileChange/requestApproval","id":1,"params":{"itemId":"c"}}`, `"result":{"decision":"decline"}`},
		{"trusted mcp tool, no callback", false, `{"method":"mcpServer/elicitation/request","id":1,"params":{"serverName":"echo","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"say"}}}`, `"action":"accept"`},
		{"other mcp tool, no callback", false, `{"method":"mcpServer/elicitation/request","id":1,"params":{"serverName":"other","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"say"}}}`, `"action":"decline"`},
		{"form elicitation", true, `{"method":"mcpServer/elicitation/request","id":1,"params":{"serverName":"echo","mode":"form","message":"your name?","_meta":null}}`, `"action":"decline"`},
		{"more permissions", true, `{"method":"item/permissions/requestApproval","id":1,"params":{"itemId":"c","reason":"network"}}`, `"result":{"permissions":{},"scope":"turn"}`},
		{"user input", true, `{"method":"item/tool/requestUserInput","id":1,"params":{"itemId":"c","questions":[]}}`, `"result":{"answers":{}}`},
		{"unknown", true, `{"method":"attestation/generate","id":1,"params":{}}`, `"error":{"code":-32601`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &invoker.SessionRequest{Workdir: "/w", MCPServers: trusted}
			if tc.approve {
				req.Approve = allowAll
			}
			p, _ := openTurn(t, req)
			st := appDecode(t, p, tc.line)
			if len(st.Approvals) != 0 || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), tc.answer) || !strings.Contains(string(st.Write[0]), `"id":1`) {
				t.Errorf("Step = %+v (wrote %q), want an answer with %s", st, st.Write, tc.answer)
			}
		})
	}
}

// The request's MCP servers become mcp_servers entries of the config map
// of the thread's opening, written to app-server's standard input: no
// secret (a command server's Env, a URL server's header values) is on the
// command line or in the environment, where the agent's commands could
// read it from /proc. A resume and a fork give the entries again.
func TestMCPServersConfig(t *testing.T) {
	req := invoker.SessionRequest{Workdir: "/w", ExtraArgs: []string{"--enable=x"}, Env: []string{"CLINVOKE_TEST_MODE=x"}, MCPServers: []invoker.MCPServer{
		{Name: "echo", Command: "/bin/mcpecho", Args: []string{"-v", `a "b"`},
			Env: []string{"CLINVOKE_TEST_API_KEY=s3cret", "CLINVOKE_TEST_MODE=x"}},
		{Name: "go-tools", URL: "http://127.0.0.1:4000/mcp/go-tools", Headers: map[string]string{"Authorization": "Bearer tok3n", "X-Team": "blue"}},
	}}
	cmd, err := backend{}.SessionCommand(&req)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"app-server", "--enable=x"}; !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("Args = %q, want %q", cmd.Args, want)
	}
	if len(cmd.Env) != 0 {
		t.Errorf("Env = %q, want none", cmd.Env)
	}
	for _, a := range append(append([]string(nil), cmd.Args...), cmd.Env...) {
		for _, secret := range []string{"s3cret", "tok3n", "blue"} {
			if strings.Contains(a, secret) {
				t.Errorf("a secret is on the command line or in the environment: %q", a)
			}
		}
	}
	want := map[string]any{
		"mcp_servers.echo.command":                         "/bin/mcpecho",
		"mcp_servers.echo.args":                            []any{"-v", `a "b"`},
		"mcp_servers.echo.env":                             map[string]any{"CLINVOKE_TEST_API_KEY": "s3cret", "CLINVOKE_TEST_MODE": "x"},
		"mcp_servers.echo.default_tools_approval_mode":     "approve",
		"mcp_servers.go-tools.url":                         "http://127.0.0.1:4000/mcp/go-tools",
		"mcp_servers.go-tools.http_headers":                map[string]any{"Authorization": "Bearer tok3n", "X-Team": "blue"},
		"mcp_servers.go-tools.default_tools_approval_mode": "approve",
	}
	for _, tc := range []struct {
		resume string
		fork   bool
		method string
	}{
		{"", false, "thread/start"}, {"T0", false, "thread/resume"}, {"T0", true, "thread/fork"},
	} {
		r := req
		r.SessionID, r.Fork = tc.resume, tc.fork
		_, open := openTurn(t, &r)
		var m struct {
			Method string
			Params struct{ Config map[string]any }
		}
		if err := json.Unmarshal(open, &m); err != nil {
			t.Fatal(err)
		}
		if m.Method != tc.method || !reflect.DeepEqual(m.Params.Config, want) {
			t.Errorf("opening %s with config\n%v\nwant %s with\n%v", m.Method, m.Params.Config, tc.method, want)
		}
	}

	// With a callback, Codex asks about the servers' tools, and the
	// profiles hold the sandbox.
	req.Approve = allowAll
	req.Permission = invoker.WorkspaceWrite
	cmd, err = backend{}.SessionCommand(&req)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(cmd.Args, " ")
	if _, open := openTurn(t, &req); !strings.Contains(string(open), `"mcp_servers.echo.command"`) || strings.Contains(string(open), "default_tools_approval_mode") {
		t.Errorf("with Approve, the opening %s lacks the servers or still pre-approves their tools", open)
	}
	for _, w := range []string{`permissions.clinvoke-read-only.filesystem=`, `permissions.clinvoke-workspace-write.filesystem=`, `default_permissions="clinvoke-workspace-write"`, `"/nonexistent-clinvoke-sandbox-ceiling"="none"`} {
		if !strings.Contains(all, w) {
			t.Errorf("with Approve, Args %q lack %s", cmd.Args, w)
		}
	}
}

// Entries Codex cannot take are refused before anything starts.
func TestMCPServersInvalid(t *testing.T) {
	for _, servers := range [][]invoker.MCPServer{
		{{Name: "a b", Command: "x"}},
		{{Name: "a.b", Command: "x"}},
		{{Name: "a", Command: "x"}, {Name: "a", URL: "http://h"}},
		{{Name: "a"}},
		{{Name: "a", Command: "x", URL: "http://h"}},
		{{Name: "a", Command: "x", Env: []string{"s3cret-alone"}}},
		{{Name: "a", Command: "x", Env: []string{"=s3cret-unnamed"}}},
		{{Name: "a", Command: "x", Env: []string{"K=s3cret-one", "K=s3cret-two"}}},
		{{Name: "a", Server: mcp.NewServer(&mcp.Implementation{Name: "s"}, nil)}},
	} {
		_, err := (backend{}).SessionCommand(&invoker.SessionRequest{MCPServers: servers, Env: []string{"REQ=one"}})
		if !errors.Is(err, invoker.ErrInvalidRequest) {
			t.Errorf("SessionCommand(%+v) error = %v, want ErrInvalidRequest", servers, err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("SessionCommand() error = %q quotes an Env entry's value", err)
		}
	}
}

// A file change of an interrupted turn never completes: the next turn does
// not keep it, and a question about its item id there names no paths.
func TestFileChangeForgottenAtNextTurn(t *testing.T) {
	p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Approve: allowAll})
	appDecode(t, p, `{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"fileChange","id":"call_2","status":"inProgress","changes":[{"path":"/w/a.txt","kind":{"type":"add"},"diff":"x"}]}}}`)
	if n := len(p.(*protocol).changes); n != 1 {
		t.Fatalf("%d file changes tracked in the turn, want 1", n)
	}
	if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "again"}); err != nil {
		t.Fatal(err)
	}
	if n := len(p.(*protocol).changes); n != 0 {
		t.Errorf("%d file changes of the last turn still tracked, want 0", n)
	}
}

// A file change allowed for the session below Unlimited is answered
// once: the session keeps the grant, so each later change is still
// judged, then accepted without asking the program. At Unlimited Codex
// keeps the grant itself.
func TestApprovalFileChangeForSession(t *testing.T) {
	started := func(item, path string) string {
		return `{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"fileChange","id":"` + item +
			`","status":"inProgress","changes":[{"path":"` + path + `","kind":{"type":"add"},"diff":"x"}]}}}`
	}
	asked := func(id int, item string) string {
		return fmt.Sprintf(`{"method":"item/fileChange/requestApproval","id":%d,"params":{"threadId":"T1","turnId":"U1","itemId":"%s"}}`, id, item)
	}
	for _, tc := range []struct {
		level       invoker.Permission
		first       string // the answer to the change allowed for the session
		later       string // what the next change inside gets
		laterAsked  bool   // whether the program is asked about it
		outsideDecl bool   // whether a change outside is declined without asking
	}{
		{invoker.WorkspaceWrite, `"decision":"accept"`, `"decision":"accept"`, false, true},
		{invoker.Unlimited, `"decision":"acceptForSession"`, "", true, false},
	} {
		t.Run(string(tc.level), func(t *testing.T) {
			dir := t.TempDir()
			p, _ := openTurn(t, &invoker.SessionRequest{Workdir: dir, Permission: tc.level, Approve: allowAll})
			appDecode(t, p, started("c1", dir+"/a.txt"))
			st := appDecode(t, p, asked(8, "c1"))
			if len(st.Approvals) != 1 {
				t.Fatalf("first change: Step = %+v, want the program asked", st)
			}
			if out := st.Approvals[0].Answer(invoker.Decision{Allow: true, ForSession: true}); len(out) != 1 || !strings.Contains(string(out[0]), tc.first) {
				t.Fatalf("ForSession answered %q, want %s", out, tc.first)
			}
			appDecode(t, p, started("c2", dir+"/b.txt"))
			st = appDecode(t, p, asked(9, "c2"))
			if got := len(st.Approvals) == 1; got != tc.laterAsked {
				t.Fatalf("later change inside: Step = %+v, want the program asked: %v", st, tc.laterAsked)
			}
			if !tc.laterAsked && (len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), tc.later) || !strings.Contains(string(st.Write[0]), `"id":9`)) {
				t.Errorf("later change inside: wrote %q, want %s", st.Write, tc.later)
			}
			appDecode(t, p, started("c3", "/etc/clinvoke-probe"))
			st = appDecode(t, p, asked(10, "c3"))
			declined := len(st.Approvals) == 0 && len(st.Write) == 1 && strings.Contains(string(st.Write[0]), `"decision":"decline"`)
			if declined != tc.outsideDecl {
				t.Errorf("change outside the workdir: Step = %+v (wrote %q), want declined without asking: %v", st, st.Write, tc.outsideDecl)
			}
		})
	}
}
