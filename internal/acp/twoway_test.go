package acp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// approveAll is an Approve callback for tests; the protocol never calls it.
func approveAll(context.Context, invoker.Approval) invoker.Decision {
	return invoker.Decision{Allow: true}
}

// geminiOptions are the options Gemini CLI 0.61.0 offers for a shell
// command (recorded in gemini/testdata/session/approval.jsonl).
const geminiOptions = `[{"optionId":"proceed_always","name":"Allow for this session","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`

// mcpOptions are the options Gemini CLI offers for an MCP tool.
const mcpOptions = `[{"optionId":"proceed_always_server","kind":"allow_always"},{"optionId":"proceed_always_tool","kind":"allow_always"},{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}]`

// permissionLine is a session/request_permission of id for toolCall.
func permissionLine(id, toolCall, options string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"S1","options":` + options + `,"toolCall":` + toolCall + `}}`
}

// outcomeOf returns the outcome object of an answer line.
func outcomeOf(t *testing.T, line []byte) string {
	t.Helper()
	var m struct {
		Result struct {
			Outcome json.RawMessage `json:"outcome"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("answer %s: %v", line, err)
	}
	return string(m.Result.Outcome)
}

// TestApprovals checks which requests for permission go to the program
// (Step.Approvals), how each is described, and which are answered at
// once: above the ceiling rejected, the request's MCP servers trusted,
// everything as before without a callback.
func TestApprovals(t *testing.T) {
	const (
		shell = `{"toolCallId":"run_shell_command__run_shell_command_1_0","status":"pending","title":"touch made.txt","content":[{"type":"content","content":{"type":"text","text":"[current working directory /w] (Run a shell command)"}}],"locations":[],"kind":"execute"}`
		edit  = `{"toolCallId":"write_file__write_file_1_0","title":"Writing to a.txt","content":[{"type":"diff","path":"/w/a.txt","oldText":null,"newText":"x"}],"locations":[{"path":"/w/a.txt"}],"kind":"edit"}`
		mcp   = `{"toolCallId":"mcp_gotools_greet__mcp_gotools_greet_1_0","title":"greet (gotools MCP Server)","content":[{"type":"content","content":{"type":"text","text":"{\"name\":\"Ada\"}"}}],"locations":[],"kind":"other"}`
		other = `{"toolCallId":"mcp_settings_x__mcp_settings_x_1_0","title":"x (settings MCP Server)","content":[],"locations":[],"kind":"other"}`
		argv  = `{"toolCallId":"c1","title":"Run","rawInput":{"command":["ls","-l"],"cwd":"/w/sub"},"kind":"execute"}`
		fetch = `{"toolCallId":"web_fetch__1","title":"Fetch https://x","kind":"fetch"}`
	)
	gotools := []invoker.MCPServer{{Name: "gotools", URL: "http://127.0.0.1:1/mcp/gotools", Headers: map[string]string{"Authorization": "Bearer t"}}}
	for _, tc := range []struct {
		name     string
		perm     invoker.Permission
		approve  bool
		servers  []invoker.MCPServer
		toolCall string
		options  string
		// Either the request goes to the program, described as want,
		// or it is answered at once with outcome.
		want    *invoker.Approval
		outcome string
		warning bool
	}{
		{name: "command to the program", perm: invoker.Unlimited, approve: true, toolCall: shell, options: geminiOptions,
			want: &invoker.Approval{Kind: "command", Tool: invoker.Tool{Name: "run_shell_command", ID: "run_shell_command__run_shell_command_1_0", Input: json.RawMessage(`{"title":"touch made.txt"}`)}, Command: "touch made.txt", Cwd: "/w", Workdir: "/w", SessionID: "S1"}},
		{name: "command above the ceiling", perm: invoker.WorkspaceWrite, approve: true, toolCall: shell, options: geminiOptions,
			outcome: `{"optionId":"cancel","outcome":"selected"}`, warning: true},
		{name: "edit to the program", perm: invoker.WorkspaceWrite, approve: true, toolCall: edit, options: geminiOptions,
			want: &invoker.Approval{Kind: "file_change", Tool: invoker.Tool{Name: "write_file", ID: "write_file__write_file_1_0", Input: json.RawMessage(`{"title":"Writing to a.txt"}`)}, Paths: []string{"/w/a.txt"}, Workdir: "/w", SessionID: "S1"}},
		{name: "edit above read-only", perm: invoker.ReadOnly, approve: true, toolCall: edit, options: geminiOptions,
			outcome: `{"optionId":"cancel","outcome":"selected"}`, warning: true},
		{name: "argv command with cwd", perm: invoker.Unlimited, approve: true, toolCall: argv, options: geminiOptions,
			want: &invoker.Approval{Kind: "command", Tool: invoker.Tool{Name: "execute", ID: "c1", Input: json.RawMessage(`{"command":["ls","-l"],"cwd":"/w/sub"}`)}, Command: "ls -l", Cwd: "/w/sub", Workdir: "/w", SessionID: "S1"}},
		{name: "fetch under read-only", perm: invoker.ReadOnly, approve: true, toolCall: fetch, options: geminiOptions,
			want: &invoker.Approval{Kind: "tool", Tool: invoker.Tool{Name: "web_fetch", ID: "web_fetch__1", Input: json.RawMessage(`{"title":"Fetch https://x"}`)}, Workdir: "/w", SessionID: "S1"}},
		{name: "request's MCP tool under read-only", perm: invoker.ReadOnly, approve: true, servers: gotools, toolCall: mcp, options: mcpOptions,
			want: withMCP(invoker.Approval{Kind: "mcp_tool", Tool: invoker.Tool{Name: "mcp_gotools_greet", ID: "mcp_gotools_greet__mcp_gotools_greet_1_0", Input: json.RawMessage(`{"name":"Ada"}`)}, Workdir: "/w", SessionID: "S1"}, "gotools", "greet")},
		{name: "another server's MCP tool above the ceiling", perm: invoker.WorkspaceWrite, approve: true, servers: gotools, toolCall: other, options: mcpOptions,
			outcome: `{"optionId":"cancel","outcome":"selected"}`, warning: true},
		{name: "another server's MCP tool under unlimited", perm: invoker.Unlimited, approve: true, toolCall: other, options: mcpOptions,
			want: withMCP(invoker.Approval{Kind: "mcp_tool", Tool: invoker.Tool{Name: "mcp_settings_x", ID: "mcp_settings_x__mcp_settings_x_1_0", Input: json.RawMessage(`{"title":"x (settings MCP Server)"}`)}, Workdir: "/w", SessionID: "S1"}, "settings", "x")},
		{name: "no callback: command allowed", perm: invoker.Unlimited, toolCall: shell, options: geminiOptions,
			outcome: `{"optionId":"proceed_once","outcome":"selected"}`},
		{name: "no callback: command rejected", perm: invoker.ReadOnly, toolCall: shell, options: geminiOptions,
			outcome: `{"optionId":"cancel","outcome":"selected"}`, warning: true},
		{name: "no callback: request's MCP tool trusted", perm: invoker.ReadOnly, servers: gotools, toolCall: mcp, options: mcpOptions,
			outcome: `{"optionId":"proceed_always_server","outcome":"selected"}`},
		{name: "no callback: another server's MCP tool rejected", perm: invoker.ReadOnly, servers: gotools, toolCall: other, options: mcpOptions,
			outcome: `{"optionId":"cancel","outcome":"selected"}`, warning: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := invoker.SessionRequest{Permission: tc.perm, MCPServers: tc.servers}
			if tc.approve {
				req.Approve = approveAll
			}
			cfg := geminiConfig
			cfg.Modes = nil // no switch to wait for
			x := newProto(t, cfg, req)
			x.openWith(`{"mcpCapabilities":{"http":true}}`)
			x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
			line := permissionLine("7", tc.toolCall, tc.options)
			st := x.feed(line)
			warned := slices.ContainsFunc(st.Events, func(ev invoker.Event) bool { return ev.Kind == invoker.KindWarning })
			if warned != tc.warning {
				t.Errorf("warning = %v, want %v (events %v)", warned, tc.warning, kinds(st.Events))
			}
			if tc.want == nil {
				if len(st.Approvals) != 0 || len(st.Write) != 1 {
					t.Fatalf("step = %d approvals, %q written; want an answer at once", len(st.Approvals), st.Write)
				}
				if got := outcomeOf(t, st.Write[0]); got != tc.outcome {
					t.Errorf("outcome = %s, want %s", got, tc.outcome)
				}
				return
			}
			if len(st.Approvals) != 1 || len(st.Write) != 0 {
				t.Fatalf("step = %d approvals, %q written; want one approval and nothing written", len(st.Approvals), st.Write)
			}
			got := st.Approvals[0].Request
			if !slices.ContainsFunc(st.Events, func(ev invoker.Event) bool {
				return ev.Kind == invoker.KindToolCall && ev.Tool.ID == got.Tool.ID && ev.Tool.Status == "pending"
			}) {
				t.Errorf("events %v: no pending KindToolCall of the call asked about", kinds(st.Events))
			}
			if string(got.Raw) != line {
				t.Errorf("Raw = %s, want the request", got.Raw)
			}
			got.Raw = nil
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tc.want)
			if string(gj) != string(wj) {
				t.Errorf("Approval =\n%s\nwant\n%s", gj, wj)
			}
		})
	}
}

// TestApprovalAnswers checks the option each Decision selects, the
// withdrawal of a pending request by Cancel, Interrupt and the turn's end,
// and that a request is answered once.
// withMCP returns a with the names of its MCP tool.
func withMCP(a invoker.Approval, server, tool string) *invoker.Approval {
	a.MCP.Server, a.MCP.Tool = server, tool
	return &a
}

func TestApprovalAnswers(t *testing.T) {
	const shell = `{"toolCallId":"run_shell_command__1","title":"touch x","kind":"execute"}`
	const mcp = `{"toolCallId":"mcp_gotools_greet__1","title":"greet (gotools MCP Server)","kind":"other"}`
	for _, tc := range []struct {
		name     string
		toolCall string
		options  string
		act      func(x *proto, a driver.Approval) [][]byte
		want     string // the outcome written
	}{
		{"allow", shell, geminiOptions, func(_ *proto, a driver.Approval) [][]byte { return a.Answer(invoker.Decision{Allow: true}) },
			`{"optionId":"proceed_once","outcome":"selected"}`},
		{"allow for the session", shell, geminiOptions, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{Allow: true, ForSession: true})
		}, `{"optionId":"proceed_always","outcome":"selected"}`},
		{"allow an MCP tool for the session", mcp, mcpOptions, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{Allow: true, ForSession: true})
		}, `{"optionId":"proceed_always_tool","outcome":"selected"}`},
		{"for the session without such an option", shell, `[{"optionId":"once","kind":"allow_once"}]`, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{Allow: true, ForSession: true})
		}, `{"optionId":"once","outcome":"selected"}`},
		{"deny", shell, geminiOptions, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{Message: "not today"})
		}, `{"optionId":"cancel","outcome":"selected"}`},
		{"deny without a reject option", shell, `[{"optionId":"once","kind":"allow_once"}]`, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{})
		}, `{"outcome":"cancelled"}`},
		{"changed input is denied", shell, geminiOptions, func(_ *proto, a driver.Approval) [][]byte {
			return a.Answer(invoker.Decision{Allow: true, Input: json.RawMessage(`{"command":"true"}`)})
		}, `{"optionId":"cancel","outcome":"selected"}`},
		{"cancel", shell, geminiOptions, func(_ *proto, a driver.Approval) [][]byte { return a.Cancel() },
			`{"outcome":"cancelled"}`},
		{"interrupt withdraws", shell, geminiOptions, func(x *proto, a driver.Approval) [][]byte {
			lines := x.p.Interrupt()
			if len(lines) != 2 || !strings.Contains(string(lines[0]), "session/cancel") {
				x.t.Fatalf("Interrupt() = %q, want session/cancel and the withdrawal", lines)
			}
			if late := a.Answer(invoker.Decision{Allow: true}); late != nil {
				x.t.Errorf("Answer() after the withdrawal = %q, want nothing", late)
			}
			return lines[1:]
		}, `{"outcome":"cancelled"}`},
		{"the turn's end withdraws", shell, geminiOptions, func(x *proto, a driver.Approval) [][]byte {
			st := x.feed(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`)
			if !st.TurnEnded {
				x.t.Fatalf("the prompt's response did not end the turn")
			}
			if late := a.Cancel(); late != nil {
				x.t.Errorf("Cancel() after the turn's end = %q, want nothing", late)
			}
			return st.Write
		}, `{"outcome":"cancelled"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := geminiConfig
			cfg.AllowAlways = func(ids []string, server bool) string {
				if server {
					return "proceed_always_server"
				}
				return "proceed_always_tool"
			}
			req := invoker.SessionRequest{Permission: invoker.Unlimited, Approve: approveAll,
				MCPServers: []invoker.MCPServer{{Name: "gotools", Command: "srv"}}}
			x := newProto(t, cfg, req)
			x.open()
			x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
			st := x.feed(permissionLine(`"r1"`, tc.toolCall, tc.options))
			if len(st.Approvals) != 1 {
				t.Fatalf("%d approvals, want 1", len(st.Approvals))
			}
			a := st.Approvals[0]
			lines := tc.act(x, a)
			if len(lines) != 1 {
				t.Fatalf("wrote %q, want one answer", lines)
			}
			if !strings.HasPrefix(string(lines[0]), `{"id":"r1",`) {
				t.Errorf("answer %s does not answer request r1", lines[0])
			}
			if got := outcomeOf(t, lines[0]); got != tc.want {
				t.Errorf("outcome = %s, want %s", got, tc.want)
			}
			if again := a.Answer(invoker.Decision{Allow: true}); again != nil {
				t.Errorf("a second answer wrote %q, want nothing", again)
			}
		})
	}
}

// TestApproveKeepsMode checks that with a callback the session stays in
// the mode it opened in at every level, so that the agent asks, and that
// without one the level's mode is set as before.
func TestApproveKeepsMode(t *testing.T) {
	for _, approve := range []bool{false, true} {
		req := invoker.SessionRequest{Permission: invoker.Unlimited}
		if approve {
			req.Approve = approveAll
		}
		x := newProto(t, geminiConfig, req)
		x.p.Open()
		x.feed(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
		st := x.feed(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","modes":{"currentModeId":"default","availableModes":[]}}}`)
		if switched := len(st.Write) == 1 && strings.Contains(string(st.Write[0]), `"modeId":"yolo"`); switched == approve {
			t.Errorf("approve %v: after session/new wrote %q; want set_mode yolo only without a callback", approve, st.Write)
		}
	}
}

// TestMCPServersSent checks the mcpServers of session/new, and the
// refusal of an HTTP server by an agent without mcpCapabilities.http.
func TestMCPServersSent(t *testing.T) {
	servers := []invoker.MCPServer{
		{Name: "files", Command: "/bin/srv", Args: []string{"-v"}, Env: []string{"A=1", "B=x=y"}},
		{Name: "bare", Command: "srv"},
		{Name: "gotools", URL: "http://127.0.0.1:9/mcp/gotools", Headers: map[string]string{"X-B": "2", "Authorization": "Bearer tok"}},
	}
	const want = `[{"args":["-v"],"command":"/bin/srv","env":[{"name":"A","value":"1"},{"name":"B","value":"x=y"}],"name":"files"},` +
		`{"args":[],"command":"srv","env":[],"name":"bare"},` +
		`{"headers":[{"name":"Authorization","value":"Bearer tok"},{"name":"X-B","value":"2"}],"name":"gotools","type":"http","url":"http://127.0.0.1:9/mcp/gotools"}]`
	for _, tc := range []struct {
		name    string
		caps    string
		servers []invoker.MCPServer
		want    string
		wantErr error
	}{
		{"none", `{}`, nil, `[]`, nil},
		{"all kinds", `{"mcpCapabilities":{"http":true,"sse":true}}`, servers, want, nil},
		{"stdio only without http", `{}`, servers[:2], want[:strings.Index(want, `,{"headers"`)] + "]", nil},
		{"http refused", `{"mcpCapabilities":{"sse":true}}`, servers, "", invoker.ErrUnsupported},
		{"go server unconverted", `{"mcpCapabilities":{"http":true}}`, []invoker.MCPServer{{Name: "g", Server: nil, URL: ""}}, "", invoker.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newProto(t, Config{}, invoker.SessionRequest{MCPServers: tc.servers})
			x.p.Open()
			st, err := x.p.Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":` + tc.caps + `}}`))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Decode(initialize response) error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), `"g`) && !strings.Contains(err.Error(), `"gotools"`) {
					t.Errorf("error %q does not name the server", err)
				}
				return
			}
			var m struct {
				Params struct {
					MCPServers json.RawMessage `json:"mcpServers"`
				} `json:"params"`
			}
			if len(st.Write) != 1 || json.Unmarshal(st.Write[0], &m) != nil {
				t.Fatalf("wrote %q, want session/new", st.Write)
			}
			if got := string(m.Params.MCPServers); got != tc.want {
				t.Errorf("mcpServers =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
