package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// declined reports whether the step answers at once, without asking, with
// the answer Codex reads as a refusal (want), for request id.
func declined(t *testing.T, st driver.Step, id, want string) bool {
	t.Helper()
	return len(st.Approvals) == 0 && len(st.Write) == 1 && strings.Contains(string(st.Write[0]), want) &&
		strings.Contains(string(st.Write[0]), `"id":`+id)
}

// fileChangeItem is the item/started of a file change of turn U1 with
// changes (a JSON array).
func fileChangeItem(id, changes string) string {
	return `{"method":"item/started","params":{"threadId":"T1","turnId":"U1","item":{"type":"fileChange","id":"` + id + `","status":"inProgress","changes":` + changes + `}}}`
}

// fileChangeRequest asks approval of the file change item id.
func fileChangeRequest(id string, extra string) string {
	return `{"method":"item/fileChange/requestApproval","id":8,"params":{"threadId":"T1","turnId":"U1","itemId":"` + id + `","startedAtMs":1` + extra + `}}`
}

// TestFileChangeCeiling checks that a file change is judged by the level
// before the program is asked: under ReadOnly declined; under
// WorkspaceWrite every path of the patch (a move's destination, a
// grantRoot included) must be inside the working directory, resolved;
// under Unlimited the program is asked.
func TestFileChangeCeiling(t *testing.T) {
	w, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(w, "link")); err != nil {
		t.Fatal(err)
	}
	change := func(path string) string {
		return `[{"path":"` + path + `","kind":{"type":"add"},"diff":"x"}]`
	}
	for _, tc := range []struct {
		name    string
		perm    invoker.Permission
		changes string // "" for no item started
		extra   string // more params of the request
		asked   bool
	}{
		{"read-only, inside", invoker.ReadOnly, change(filepath.Join(w, "a.txt")), "", false},
		{"workspace, inside", invoker.WorkspaceWrite, change(filepath.Join(w, "a.txt")), "", true},
		{"workspace, relative inside", invoker.WorkspaceWrite, change("sub/a.txt"), "", true},
		{"workspace, through a link", invoker.WorkspaceWrite, change(filepath.Join(w, "link", "pwned.txt")), "", false},
		{"workspace, outside", invoker.WorkspaceWrite, change(filepath.Join(outside, "x")), "", false},
		{"workspace, one of two outside", invoker.WorkspaceWrite, `[{"path":"` + filepath.Join(w, "a") + `","kind":{"type":"add"},"diff":"x"},{"path":"/etc/x","kind":{"type":"delete"},"diff":""}]`, "", false},
		{"workspace, moved outside", invoker.WorkspaceWrite, `[{"path":"` + filepath.Join(w, "a") + `","kind":{"type":"update","move_path":"` + filepath.Join(outside, "a") + `"},"diff":"x"}]`, "", false},
		{"workspace, in .codex", invoker.WorkspaceWrite, change(filepath.Join(w, ".codex", "config.toml")), "", false},
		{"workspace, grant of a root outside", invoker.WorkspaceWrite, change(filepath.Join(w, "a.txt")), `,"grantRoot":"` + outside + `"`, false},
		{"workspace, grant of /", invoker.WorkspaceWrite, change(filepath.Join(w, "a.txt")), `,"grantRoot":"/"`, false},
		{"workspace, grant of a root through a link", invoker.WorkspaceWrite, change(filepath.Join(w, "a.txt")), `,"grantRoot":"` + filepath.Join(w, "link") + `"`, false},
		{"workspace, grant of a root inside", invoker.WorkspaceWrite, change(filepath.Join(w, "a.txt")), `,"grantRoot":"` + w + `"`, true},
		{"workspace, no change announced", invoker.WorkspaceWrite, "", "", false},
		{"unlimited, outside", invoker.Unlimited, change(filepath.Join(outside, "x")), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openTurn(t, &invoker.SessionRequest{Workdir: w, Permission: tc.perm, Approve: allowAll})
			if tc.changes != "" {
				appDecode(t, p, fileChangeItem("call_2", tc.changes))
			}
			st := appDecode(t, p, fileChangeRequest("call_2", tc.extra))
			if tc.asked {
				if len(st.Approvals) != 1 || len(st.Write) != 0 {
					t.Errorf("Step = %+v, want the program asked", st)
				}
				return
			}
			if !declined(t, st, "8", `"decision":"decline"`) {
				t.Errorf("wrote %q with %d approvals, want a decline without asking", st.Write, len(st.Approvals))
			}
		})
	}
}

// TestFileChangeCeilingOfTurn checks that a turn's lower level bounds the
// file changes of that turn.
func TestFileChangeCeilingOfTurn(t *testing.T) {
	w := t.TempDir()
	p, _ := openTurn(t, &invoker.SessionRequest{Workdir: w, Permission: invoker.WorkspaceWrite, Approve: allowAll})
	appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`)
	appDecode(t, p, `{"id":4,"result":{}}`) // the clean
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "more", Permission: invoker.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	appDecode(t, p, `{"id":`+jsonInt(idOf(t, lines[0]))+`,"result":{"turn":{"id":"U1"}}}`)
	appDecode(t, p, fileChangeItem("call_5", `[{"path":"`+filepath.Join(w, "a.txt")+`","kind":{"type":"add"},"diff":"x"}]`))
	st := appDecode(t, p, fileChangeRequest("call_5", ""))
	if !declined(t, st, "8", `"decision":"decline"`) {
		t.Errorf("a file change in a read-only turn: wrote %q with %d approvals, want a decline without asking", st.Write, len(st.Approvals))
	}
}

// TestRequestsRefused checks the requests Codex's answer is a refusal to,
// without asking: one that comes after turn/completed (while the thread's
// background terminals are being cleaned), one of another turn, one whose
// params do not decode, one with a null id, a command that asks for
// network access below Unlimited, and a tool of an MCP server that is not
// the request's below Unlimited.
func TestRequestsRefused(t *testing.T) {
	const cmd = `{"method":"item/commandExecution/requestApproval","id":7,"params":{"kind":"command","threadId":"T1","turnId":"U1","itemId":"call_1","command":"/bin/bash -lc 'rm -rf x'","cwd":"/w","startedAtMs":1}}`
	for _, tc := range []struct {
		name   string
		perm   invoker.Permission
		before []string
		line   string
		id     string
		answer string
	}{
		{"after turn/completed", invoker.Unlimited,
			[]string{`{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`}, cmd, "7", `"decision":"decline"`},
		{"of another turn", invoker.Unlimited, nil,
			strings.Replace(cmd, `"turnId":"U1"`, `"turnId":"U0"`, 1), "7", `"decision":"decline"`},
		{"params that do not decode", invoker.Unlimited, nil,
			`{"method":"item/commandExecution/requestApproval","id":7,"params":{"itemId":"call_1","command":["rm","-rf","x"]}}`, "7", `"decision":"decline"`},
		{"params that are no object", invoker.Unlimited, nil,
			`{"method":"item/fileChange/requestApproval","id":7,"params":"call_1"}`, "7", `"decision":"decline"`},
		{"elicitation that does not decode", invoker.Unlimited, nil,
			`{"method":"mcpServer/elicitation/request","id":7,"params":{"serverName":5}}`, "7", `"action":"decline"`},
		{"null id", invoker.Unlimited, nil, strings.Replace(cmd, `"id":7`, `"id":null`, 1), "null", `"decision":"decline"`},
		{"network access", invoker.WorkspaceWrite, nil,
			strings.Replace(cmd, `"startedAtMs":1`, `"startedAtMs":1,"networkApprovalContext":{"host":"example.com","protocol":"https"}`, 1), "7", `"decision":"decline"`},
		{"another server's tool", invoker.WorkspaceWrite, nil,
			`{"method":"mcpServer/elicitation/request","id":7,"params":{"threadId":"T1","turnId":"U1","serverName":"theirs","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"say"},"message":"?"}}`, "7", `"action":"decline"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Permission: tc.perm, Approve: allowAll,
				MCPServers: []invoker.MCPServer{{Name: "ours", Command: "srv"}}})
			for _, l := range tc.before {
				appDecode(t, p, l)
			}
			st := appDecode(t, p, tc.line)
			if !declined(t, st, tc.id, tc.answer) {
				t.Errorf("wrote %q with %d approvals, want %s without asking", st.Write, len(st.Approvals), tc.answer)
			}
		})
	}
	// The same requests within the level go to the program.
	for _, tc := range []struct{ name, line string }{
		{"network access at unlimited", strings.Replace(cmd, `"startedAtMs":1`, `"startedAtMs":1,"networkApprovalContext":{"host":"example.com","protocol":"https"}`, 1)},
		{"a sub-agent thread's question during the turn", strings.Replace(strings.Replace(cmd, `"turnId":"U1"`, `"turnId":"V1"`, 1), `"threadId":"T1"`, `"threadId":"T2"`, 1)},
		{"another server's tool at unlimited", `{"method":"mcpServer/elicitation/request","id":7,"params":{"threadId":"T1","turnId":"U1","serverName":"theirs","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"say"},"message":"?"}}`},
	} {
		p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: allowAll})
		if st := appDecode(t, p, tc.line); len(st.Approvals) != 1 {
			t.Errorf("%s: wrote %q, want the program asked", tc.name, st.Write)
		}
	}
}

// TestApprovalDuplicateID checks that a request reusing the id of one
// still waiting for the program is declined at once, and the waiting one
// with it, so that the program's Allow of the first is never written.
func TestApprovalDuplicateID(t *testing.T) {
	const (
		ls = `{"method":"item/commandExecution/requestApproval","id":ID,"params":{"threadId":"T1","turnId":"U1","itemId":"call_1","command":"ls","startedAtMs":1}}`
		rm = `{"method":"item/commandExecution/requestApproval","id":ID,"params":{"threadId":"T1","turnId":"U1","itemId":"call_2","command":"rm -rf /w","startedAtMs":1}}`
	)
	for _, ids := range [][2]string{{"7", "7"}, {`"7"`, "7"}} {
		p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: allowAll})
		first := appDecode(t, p, strings.Replace(ls, "ID", ids[0], 1))
		if len(first.Approvals) != 1 {
			t.Fatalf("the first request: %d approvals, want 1", len(first.Approvals))
		}
		second := appDecode(t, p, strings.Replace(rm, "ID", ids[1], 1))
		if len(second.Approvals) != 0 || len(second.Write) != 2 {
			t.Fatalf("ids %s, %s: the second request: %d approvals, wrote %q; want two declines", ids[0], ids[1], len(second.Approvals), second.Write)
		}
		for _, line := range second.Write {
			if !strings.Contains(string(line), `"decision":"decline"`) {
				t.Errorf("wrote %s, want a decline", line)
			}
		}
		// The id comes back for a third request, which is asked; the
		// program's Allow of the first, coming late, answers nothing.
		third := appDecode(t, p, strings.Replace(rm, "ID", ids[0], 1))
		if len(third.Approvals) != 1 {
			t.Fatalf("a third request under the id: %d approvals, wrote %q; want it asked", len(third.Approvals), third.Write)
		}
		if late := first.Approvals[0].Answer(invoker.Decision{Allow: true}); late != nil {
			t.Errorf("the program's Allow of the first request was written: %q", late)
		}
		if lines := third.Approvals[0].Answer(invoker.Decision{}); len(lines) != 1 {
			t.Errorf("the third request's answer wrote %q, want one line", lines)
		}
	}
}
