package codex

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// A session with an Approve callback (SessionRequest.Approve) runs with
// the approval policy "untrusted": Codex asks before the commands it does
// not trust (with 0.169.0 every command the model ran, echo included),
// before file changes, and before every MCP tool call.
// Each question becomes one Approval for the callback:
//
//   - item/commandExecution/requestApproval: Kind "command", with the
//     command line as Codex runs it ("/bin/bash -lc '...'"), its Cwd and
//     Codex's Reason when it gives one;
//   - item/fileChange/requestApproval: Kind "file_change", with the Paths
//     of the change (from the item Codex announced just before) and its
//     grantRoot, the directory Codex asks to write under for the rest of
//     the session, when it names one;
//   - mcpServer/elicitation/request carrying
//     _meta.codex_approval_kind = "mcp_tool_call": Kind "mcp_tool", with
//     the tool named "mcp__SERVER__TOOL" and its arguments, and MCP.Server
//     and MCP.Tool the request's serverName and _meta.tool_name.
//
// Paths and Cwd are resolved as internal/workspace's Abs resolves them: a
// relative path (Codex's are absolute) is taken in the working directory.
//
// Tool.ID is the item id of the call (itemId; for an MCP tool, the id of
// the mcpToolCall item Codex started for it), as in the KindToolCall
// event of the same call.
//
// A Decision is answered with "accept", "acceptForSession" (ForSession:
// Codex then runs the same command for the rest of the session without
// asking; an MCP tool accepted with persist "session"), or "decline". A
// file change allowed ForSession below Unlimited is answered "accept":
// Codex's acceptForSession would apply later changes under the same paths
// without asking, so unjudged; the session keeps the grant instead, and
// each later file change Codex asks about is judged as below, then
// accepted without asking the program again. Codex takes no changed input and no
// message: a Decision with Input is answered with "decline", and the
// model reads Codex's own words for a refusal, whatever Decision.Message
// says: for a command, measured with 0.169.0, exec_command failed:
// CreateProcess { message: "Rejected(\"rejected by user\")" }; for an MCP
// tool, by Codex's source, "user rejected MCP tool call".
//
// The sandbox of the permission level stays the ceiling. Under
// "untrusted", Codex reruns an approved command outside its sandbox when
// the sandbox refused it, without asking again (measured with 0.169.0: an
// approved "touch" in a read-only sandbox created the file). A session
// with Approve therefore replaces the sandbox mode by an equivalent
// permission profile (clinvoke-read-only, clinvoke-workspace-write)
// holding one deny-read entry for a path that does not exist: with a
// deny-read entry Codex never runs a command without its sandbox, so an
// approved command runs inside it and fails where the permission level
// forbids it. Unlimited is the built-in profile ":danger-full-access", and
// so is every level under the kernel's sandbox (ownSandboxOff), whose
// ruleset then holds an approved command; "untrusted" still asks before
// each command and file change there (measured with 0.169.0).
// item/permissions/requestApproval (the model asking for more access than
// the sandbox gives) is refused without asking, granting nothing.
//
// A file change is not run in the sandbox: Codex applies an approved
// patch itself (measured with 0.169.0: accepted under the read-only
// profile, a patch was written inside and outside the working directory).
// So the protocol judges file changes before the program is asked: under
// ReadOnly every one is declined; under WorkspaceWrite every path of the
// patch (from the fileChange item Codex announced; a moved file's
// destination and a grantRoot included) must be inside the working
// directory as internal/workspace judges it (links followed, the CLIs'
// configuration such as .codex and CODEX_HOME outside), and a change no
// item announced is declined. Below Unlimited, a command's approval of
// network access (networkApprovalContext) and a tool of an MCP server that
// is not one of the request's are declined too. Declined without asking
// as well: a question that comes after turn/completed (while the thread's
// background terminals are being cleaned) or names another turn, one whose
// params do not decode or whose id is null, and one that reuses the id of
// a question the program is deciding (that one is declined with it, and
// the program's decision is not written: an answer to the id could reach
// either).
//
// Without Approve, the session runs with the approval policy "never", as
// before: no question comes, and any that does is declined at once.

// denyCeiling is the deny-read entry of the profiles: a path that does not
// exist, whose only effect is to keep Codex from running a command
// without the sandbox.
const denyCeiling = "/nonexistent-clinvoke-sandbox-ceiling"

// Names of the permission profiles of an Approve session.
const (
	profileReadOnly       = "clinvoke-read-only"
	profileWorkspaceWrite = "clinvoke-workspace-write"
	profileFullAccess     = ":danger-full-access"
)

// profileArgs returns the -c overrides defining the permission profiles
// of an Approve session, with mode's as the default (thread/resume and
// thread/fork take no profile, so the default is what they get).
func profileArgs(mode string) []string {
	deny := tomlString(denyCeiling) + `="none"`
	return []string{
		"--config=permissions." + profileReadOnly + `.filesystem={":root"="read",` + deny + "}",
		"--config=permissions." + profileWorkspaceWrite + `.filesystem={":root"="read",":project_roots"={"."="write"},":tmpdir"="write",":slash_tmp"="write",` + deny + "}",
		"--config=default_permissions=" + tomlString(profileOf(mode)),
	}
}

// profileOf returns the permission profile of a sandbox mode.
func profileOf(mode string) string {
	switch mode {
	case "workspace-write":
		return profileWorkspaceWrite
	case "danger-full-access":
		return profileFullAccess
	}
	return profileReadOnly
}

// approvalParams are the fields of Codex's approval requests clinvoke
// reads.
type approvalParams struct {
	ThreadID string  `json:"threadId"`
	TurnID   string  `json:"turnId"`
	ItemID   string  `json:"itemId"`
	Command  *string `json:"command"`
	Cwd      *string `json:"cwd"`
	Reason   *string `json:"reason"`
	// NetworkApprovalContext, not null, makes a command's approval one
	// of network access.
	NetworkApprovalContext json.RawMessage `json:"networkApprovalContext"`
	// GrantRoot is a file change's request to write under a directory
	// for the rest of the session.
	GrantRoot *string `json:"grantRoot"`
	// Elicitations.
	ServerName string `json:"serverName"`
	Message    string `json:"message"`
	Meta       *struct {
		Kind       string          `json:"codex_approval_kind"`
		ToolName   string          `json:"tool_name"`
		ToolParams json.RawMessage `json:"tool_params"`
	} `json:"_meta"`
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reply returns the JSON-RPC response to request id.
func reply(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

// refusal returns Codex's answer that refuses the request method of id,
// granting nothing, in the method's own shape.
func refusal(method string, id json.RawMessage) []byte {
	switch method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		return reply(id, map[string]string{"decision": "decline"})
	case "mcpServer/elicitation/request":
		return reply(id, map[string]any{"action": "decline", "content": nil, "_meta": nil})
	case "item/permissions/requestApproval":
		return reply(id, map[string]any{"permissions": map[string]any{}, "scope": "turn"})
	case "item/tool/requestUserInput":
		return reply(id, map[string]any{"answers": map[string]any{}})
	case "execCommandApproval", "applyPatchApproval":
		return reply(id, map[string]string{"decision": "denied"})
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32601, "message": "not supported by clinvoke: " + method}})
	return b
}

// requestKey is the key of a request id of Codex's in protocol.asking: 7,
// 7.0 and "7" are one key.
func requestKey(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		id = json.RawMessage(s)
	}
	var n json.Number
	if json.Unmarshal(id, &n) == nil {
		if f, err := n.Float64(); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return string(id)
}

// An asked is a request of Codex's that the program is deciding: what
// refuses it.
type asked struct {
	method string
	id     json.RawMessage
}

// settle reports whether w, the request key, still waits for the
// program's decision, and marks it answered: not when a second request
// under its id made it void, even when the id has come back since.
func (p *protocol) settle(key string, w *asked) bool {
	if p.asking[key] != w {
		return false
	}
	delete(p.asking, key)
	return true
}

// serverRequest answers a request of Codex's. With Approve, the approval
// questions within the level go to the callback (Step.Approvals);
// everything else, and every question without Approve, is answered at
// once, so that no turn waits on us: approvals declined, the trusted MCP
// servers' tool calls accepted, other elicitations declined, requests for
// more permissions granted nothing, and unknown methods refused.
//
// Refused without asking, whatever the callback would say: a request
// whose id is null or whose params do not decode; one that reuses the id
// of a request the program is deciding (and that one with it, since an
// answer to the id could reach either); a question that comes after
// turn/completed, or of another turn; and what the level in force does
// not allow (see fileChangeAbove, and, below Unlimited, a command's
// network access and a tool of an MCP server that is not the request's).
func (p *protocol) serverRequest(m *rpc, raw json.RawMessage) driver.Step {
	warn := func(text string) []invoker.Event {
		return []invoker.Event{{Kind: invoker.KindWarning, Raw: raw, Text: text}}
	}
	refuse := func(why string) driver.Step {
		return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)}, Events: warn("codex asked " + m.Method + "; clinvoke refused it: " + why)}
	}
	if string(m.ID) == "null" {
		return refuse("its id is null")
	}
	key := requestKey(m.ID)
	if first, ok := p.asking[key]; ok {
		delete(p.asking, key)
		st := refuse("it reuses the id of a request the program is deciding, which is refused with it")
		st.Write = append(st.Write, refusal(first.method, first.id))
		return st
	}
	var params approvalParams
	if err := json.Unmarshal(m.Params, &params); err != nil {
		return refuse("its params do not decode (" + err.Error() + ")")
	}
	declined := "codex asked " + m.Method + "; clinvoke declined (sessions run with the approval policy never)"
	// ask hands a to the program, and answers with what answer makes of
	// its decision, unless the request is settled otherwise first.
	stale := func() string {
		switch {
		case !p.inTurn || p.ended:
			return "the turn has ended"
		case params.TurnID != "" && p.turn != "" && params.TurnID != p.turn && (params.ThreadID == "" || params.ThreadID == p.thread):
			// (A sub-agent's thread has turns of its own, within ours.)
			return "it is of turn " + params.TurnID + ", not of the turn in progress"
		}
		return ""
	}
	ask := func(a invoker.Approval, answer func(d invoker.Decision) []byte) driver.Step {
		if why := stale(); why != "" {
			return refuse(why)
		}
		w := &asked{method: m.Method, id: m.ID}
		p.asking[key] = w
		return driver.Step{Approvals: []driver.Approval{{Request: a, Answer: func(d invoker.Decision) [][]byte {
			if !p.settle(key, w) {
				return nil
			}
			return [][]byte{answer(d)}
		}}}}
	}
	id := m.ID
	switch m.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		if !p.approve {
			return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)}, Events: warn(declined)}
		}
		a := invoker.Approval{Tool: invoker.Tool{ID: params.ItemID}, Workdir: p.ws.Dir(), Reason: str(params.Reason), SessionID: p.thread, Raw: raw}
		if m.Method == "item/commandExecution/requestApproval" {
			if n := params.NetworkApprovalContext; len(n) > 0 && string(n) != "null" && p.ceiling != invoker.Unlimited {
				return refuse("network access is above the permission level " + string(p.ceiling))
			}
			a.Kind, a.Tool.Name, a.Command, a.Cwd = invoker.ApprovalCommand, "command_execution", str(params.Command), a.Workdir
			if cwd := p.ws.Abs(str(params.Cwd), ""); len(cwd) > 0 {
				// The kernel's reading: the command's process changes
				// to the directory.
				a.Cwd = cwd[0]
			}
			a.Tool.Input = mustJSON(map[string]string{"command": a.Command})
		} else {
			ch := p.changes[params.ItemID]
			if why := p.fileChangeAbove(ch, params.GrantRoot); why != "" {
				return refuse(why)
			}
			a.Kind, a.Tool.Name = invoker.ApprovalFileChange, "file_change"
			for _, path := range ch.named(params.GrantRoot) {
				for _, abs := range p.ws.Abs(path, "") {
					if !slices.Contains(a.Paths, abs) {
						a.Paths = append(a.Paths, abs)
					}
				}
			}
			a.Tool.Input = objectWith("changes", ch.raw)
			if a.Reason == "" && params.GrantRoot != nil {
				a.Reason = "write access under " + *params.GrantRoot + " for the rest of the session"
			}
			if p.editsGranted && p.ceiling != invoker.Unlimited {
				// Judged above, and allowed for the session: once.
				if why := stale(); why != "" {
					return refuse(why)
				}
				return driver.Step{Write: [][]byte{reply(id, map[string]string{"decision": "accept"})}}
			}
		}
		fileChange := a.Kind == invoker.ApprovalFileChange
		return ask(a, func(d invoker.Decision) []byte {
			decision := "decline"
			switch {
			case d.Allow && len(d.Input) > 0:
				// Codex cannot run a changed input.
			case d.Allow && d.ForSession && fileChange && p.ceiling != invoker.Unlimited:
				// Codex's acceptForSession would apply later changes
				// under the same paths without asking, unjudged (a
				// link swapped in, a grantRoot): the session keeps the
				// grant instead, and Codex is answered once.
				p.editsGranted = true
				decision = "accept"
			case d.Allow && d.ForSession:
				decision = "acceptForSession"
			case d.Allow:
				decision = "accept"
			}
			return reply(id, map[string]string{"decision": decision})
		})
	case "mcpServer/elicitation/request":
		if params.Meta == nil || params.Meta.Kind != "mcp_tool_call" {
			// A server asking the user for input: clinvoke has no form
			// to fill in.
			return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)},
				Events: warn("MCP server " + params.ServerName + " asked for input (" + params.Message + "); clinvoke declined")}
		}
		if !p.approve {
			if p.trusted[params.ServerName] {
				// A server of the request: trusted, though configured
				// so that Codex does not ask.
				return driver.Step{Write: [][]byte{reply(m.ID, map[string]any{"action": "accept", "content": map[string]any{}, "_meta": nil})}}
			}
			return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)}, Events: warn(declined)}
		}
		if !p.trusted[params.ServerName] && p.ceiling != invoker.Unlimited {
			return refuse("a tool of MCP server " + params.ServerName + ", which is not one of the request's, is above the permission level " + string(p.ceiling))
		}
		tool := params.Meta.ToolName
		a := invoker.Approval{Kind: invoker.ApprovalMCPTool, Workdir: p.ws.Dir(), Reason: params.Message, SessionID: p.thread, Raw: raw,
			Tool: invoker.Tool{Name: "mcp__" + params.ServerName + "__" + tool, ID: p.mcpCalls[params.ServerName+"\x00"+tool],
				Input: driver.ValidJSON(params.Meta.ToolParams)}}
		a.MCP.Server, a.MCP.Tool = params.ServerName, tool
		return ask(a, func(d invoker.Decision) []byte {
			switch {
			case d.Allow && len(d.Input) > 0:
			case d.Allow && d.ForSession:
				return reply(id, map[string]any{"action": "accept", "content": map[string]any{}, "_meta": map[string]string{"persist": "session"}})
			case d.Allow:
				return reply(id, map[string]any{"action": "accept", "content": map[string]any{}, "_meta": nil})
			}
			return refusal(m.Method, id)
		})
	case "item/permissions/requestApproval":
		// More access than the permission level: the ceiling holds.
		return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)},
			Events: warn("codex asked for more permissions than the permission level gives (" + str(params.Reason) + "); clinvoke granted none")}
	case "item/tool/requestUserInput":
		// No one to answer: an empty answer, so the tool goes on.
		return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)},
			Events: warn("codex asked the user a question; clinvoke gave no answer")}
	case "execCommandApproval", "applyPatchApproval":
		return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)}, Events: warn(declined)}
	}
	return driver.Step{Write: [][]byte{refusal(m.Method, m.ID)}, Events: warn("codex asked " + m.Method + "; clinvoke does not support it and refused")}
}

// fileChangeAbove returns why the file change ch (with grantRoot, a
// request to write under a directory for the rest of the session) is
// above the level in force, or "": under ReadOnly every change; under
// WorkspaceWrite a change that names no file, or any of whose paths (a
// moved file's destination included) is outside the working directory as
// internal/workspace judges it. Codex applies an approved patch itself,
// outside its sandbox (measured with 0.169.0: accepted under the read-only
// profile, it was written inside and outside the working directory), so
// this is the ceiling of file changes.
func (p *protocol) fileChangeAbove(ch fileChange, grantRoot *string) string {
	switch p.ceiling {
	case invoker.Unlimited:
		return ""
	case invoker.WorkspaceWrite:
	default:
		return "a file change is above the permission level " + string(p.ceiling)
	}
	if len(ch.paths) == 0 {
		return "the file change names no file (no fileChange item announced it), and the permission level " + string(p.ceiling) + " allows changes inside the working directory only"
	}
	for _, path := range ch.named(grantRoot) {
		if why := p.ws.Outside(path, ""); why != "" {
			return "a change of " + path + " is above the permission level " + string(p.ceiling) + ": " + why
		}
	}
	return ""
}

// fileChange is what a file change's approval reports of the change
// Codex announced in item/started.
type fileChange struct {
	paths []string
	raw   json.RawMessage
}

// named returns every path a request to apply ch names: the change's
// paths, and grantRoot when it is not nil.
func (ch fileChange) named(grantRoot *string) []string {
	if grantRoot == nil {
		return ch.paths
	}
	return append(ch.paths[:len(ch.paths):len(ch.paths)], *grantRoot)
}

// track notes what the approvals of a started item will need: the paths
// of a file change, the item id of an MCP tool call.
func (p *protocol) track(it *appItem, completed bool) {
	switch it.Type {
	case "fileChange":
		if completed {
			delete(p.changes, it.ID)
			return
		}
		var changes []struct {
			Path string `json:"path"`
			Kind struct {
				MovePath *string `json:"move_path"`
			} `json:"kind"`
		}
		json.Unmarshal(it.Changes, &changes)
		ch := fileChange{raw: it.Changes}
		for _, c := range changes {
			ch.paths = append(ch.paths, c.Path)
			if c.Kind.MovePath != nil && *c.Kind.MovePath != "" {
				ch.paths = append(ch.paths, *c.Kind.MovePath) // where an update moves the file
			}
		}
		p.changes[it.ID] = ch
	case "mcpToolCall":
		key := it.Server + "\x00" + it.Tool
		if completed {
			if p.mcpCalls[key] == it.ID {
				delete(p.mcpCalls, key)
			}
			return
		}
		p.mcpCalls[key] = it.ID
	}
}
