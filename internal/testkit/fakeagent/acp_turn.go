package fakeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// prompt runs turn n of the ACP agent and answers the prompt request id
// with its stop reason. In order: ReportState's thought, Thought, Break's
// line, the Permission request, a Load marked InCLI, the Tool call, the
// turn's two-way actions (Ask, Edit, CallTool), the ClientRequest, the
// HugeLine, StreamFor's thoughts, the answer in Chunks (or the failure
// Fail), StallFor, and the response (none with NoTerminal, which exits).
func (g *acpAgent) prompt(id json.RawMessage, n int, prompt string, intr <-chan struct{}) {
	a := g.a
	sc := &a.s
	a.prompt = prompt
	pause := func(d time.Duration) bool { return pauseUnless(d, intr) }
	a.beginTurn(n)
	finish := func(stop string, in, out int) {
		g.mu.Lock()
		g.busy = false
		g.mu.Unlock()
		res := obj{{"stopReason", stop}}
		switch {
		case stop != "end_turn":
		case g.gemini:
			res = append(res, kv{"_meta", obj{{"quota", obj{{"token_count", obj{{"input_tokens", in}, {"output_tokens", out}}}}}}})
		default:
			res = append(res, kv{"usage", obj{{"inputTokens", 10 * n}, {"outputTokens", 5 * n}, {"totalTokens", 15 * n}}})
		}
		g.reply(id, res)
	}
	cancelled := func() { finish("cancelled", 0, 0) }
	if !g.preamble(intr) {
		cancelled()
		return
	}
	a.loadInCLI()
	if sc.Tool {
		g.tool()
	}
	var outs outcomes
	if sc.twoWay() {
		ctx, cancel := stopOn(intr)
		var err error
		outs, err = g.acpActions(ctx)
		cancel()
		if err != nil {
			cancelled()
			return
		}
	}
	if g.o.ClientRequest != "" && !g.clientRequest(intr) {
		cancelled()
		return
	}
	if sc.HugeLine > 0 {
		g.huge(sc.HugeLine)
	}
	if sc.StreamFor > 0 {
		stop := time.Now().Add(sc.StreamFor)
		for k := 0; time.Now().Before(stop); k++ {
			g.chunk("agent_thought_chunk", fmt.Sprintf("Working, step %d.", k+1))
			if !pause(sc.interval()) {
				cancelled()
				return
			}
		}
	}
	if sc.Fail != "" && !g.gemini {
		g.mu.Lock()
		g.busy = false
		g.mu.Unlock()
		g.fail(id, -32603, "Internal error", obj{{"details", sc.Fail}})
		return
	}
	answer := outs.answer(sc, n)
	for i, piece := range split(answer, sc.Chunks) {
		if i > 0 && !pause(sc.interval()) {
			cancelled()
			return
		}
		g.chunk("agent_message_chunk", piece)
		if strings.Contains(prompt, PromptDie) {
			os.Exit(3)
		}
	}
	if strings.Contains(prompt, PromptStall) && !pause(sleepFor) || !pause(sc.StallFor) {
		cancelled()
		return
	}
	if sc.NoTerminal {
		os.Exit(sc.ExitCode) // an agent that dies mid-turn: no response to the prompt
	}
	if g.o.Break == "result" {
		g.mu.Lock()
		g.busy = false
		g.mu.Unlock()
		g.reply(id, "oops")
		return
	}
	stop := g.o.StopReason
	if stop == "" {
		stop = "end_turn"
	}
	finish(stop, tokens(prompt), tokens(answer))
}

// preamble sends what comes first in a turn: ReportState's and Thought's
// thoughts, Break's line, and the Permission request. It reports false when
// the turn was cancelled meanwhile.
func (g *acpAgent) preamble(intr <-chan struct{}) bool {
	if g.o.ReportState {
		g.two.mu.Lock()
		mode := g.two.mode
		g.two.mu.Unlock()
		g.mu.Lock()
		model := g.model
		g.mu.Unlock()
		g.chunk("agent_thought_chunk", fmt.Sprintf("mode=%s model=%s", mode, model))
	}
	if g.o.Thought != "" {
		g.chunk("agent_thought_chunk", g.o.Thought)
	}
	switch g.o.Break {
	case "text":
		g.a.out.line([]byte("this line is not JSON"))
	case "object":
		g.a.out.line([]byte(`{"hello":"world"}`))
	}
	if g.o.Permission != "" {
		return g.permission(intr)
	}
	return true
}

// tool reports a shell tool call (echo hello) and its result, in Gemini
// CLI's shape for its flavour, else with the command as rawInput.
func (g *acpAgent) tool() {
	if g.gemini {
		tid := "run_shell_command__run_shell_command_" + randHex(6)
		g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"status", "in_progress"},
			{"title", toolCommand}, {"content", []obj{}}, {"kind", "execute"}})
		g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
			{"title", toolCommand}, {"content", textContent(toolOutput)}, {"kind", "execute"}})
		return
	}
	tid := "call_" + randHex(4)
	g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", toolCommand}, {"kind", "execute"},
		{"status", "in_progress"}, {"rawInput", obj{{"command", toolCommand}}}})
	g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
		{"content", textContent(toolOutput)}})
}

// huge reports a tool call whose result is one line of at least size
// bytes.
func (g *acpAgent) huge(size int) {
	tid := "call_" + randHex(4)
	g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", "cat big"}, {"kind", "read"}, {"status", "in_progress"}})
	g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
		{"content", textContent(strings.Repeat("x", size))}})
}

// permission asks for permission for a tool call of the kind
// ACPOptions.Permission and reports the answer as a thought; false when the
// turn was cancelled first.
func (g *acpAgent) permission(intr <-chan struct{}) bool {
	kind, title := g.o.Permission, g.o.PermissionTitle
	if title == "" {
		title = "a " + kind + " call"
	}
	tid := "perm_" + randHex(4)
	g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", title}, {"kind", kind}, {"status", "pending"}})
	call := obj{{"toolCallId", tid}, {"title", title}, {"kind", kind}}
	if kind == "edit" || kind == "delete" || kind == "move" {
		// A call that changes a file names it, as every agent's does.
		g.mu.Lock()
		cwd := g.cwd
		g.mu.Unlock()
		call = append(call, kv{"locations", []obj{{{"path", filepath.Join(cwd, "permission.txt")}}}})
	}
	if g.o.PermissionInput != nil {
		call = append(call, kv{"rawInput", g.o.PermissionInput})
	}
	var m *acpRPC
	select {
	case m = <-g.request("session/request_permission", obj{{"sessionId", g.a.sid}, {"toolCall", call}, {"options", []obj{
		{{"optionId", "allow"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "always"}, {"name", "Always allow"}, {"kind", "allow_always"}},
		{{"optionId", "reject"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}}}):
	case <-intr:
		return false
	}
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	json.Unmarshal(m.Result, &res)
	got := res.Outcome.Outcome
	if got == "selected" {
		got = res.Outcome.OptionID
	}
	status := "failed"
	if got == "allow" || got == "always" {
		status = "completed"
	}
	g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", status}})
	g.chunk("agent_thought_chunk", "permission "+kind+": "+got)
	return true
}

// clientRequest asks the client for ACPOptions.ClientRequest and reports
// the answer as a thought; false when the turn was cancelled first.
func (g *acpAgent) clientRequest(intr <-chan struct{}) bool {
	method := g.o.ClientRequest
	select {
	case m := <-g.request(method, obj{{"sessionId", g.a.sid}, {"path", "/etc/hostname"}}):
		what := "result"
		if m.Error != nil {
			what = fmt.Sprintf("error %d", m.Error.Code)
		}
		g.chunk("agent_thought_chunk", method+": "+what)
		return true
	case <-intr:
		return false
	}
}

// acpActions runs the turn's actions and returns their outcome lines; an
// error means ctx (a cancel) ended the turn.
func (g *acpAgent) acpActions(ctx context.Context) (outcomes, error) {
	return g.a.s.actions(ctx, turnActions{ask: g.acpAsk, edit: g.acpEdit, call: g.acpCallTool})
}
