package fakeagent

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// isGeminiACP reports whether args start Gemini CLI's Agent Client
// Protocol mode.
func isGeminiACP(flavor string, args []string) bool {
	if flavor != Gemini {
		return false
	}
	for _, a := range args {
		if a == "--acp" || a == "--experimental-acp" {
			return true
		}
	}
	return false
}

// acpRPC is one JSON-RPC message an ACP client writes.
type acpRPC struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
		MCPServers []acpMCPServer `json:"mcpServers"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// acpAgent is one run of the fake ACP agent.
type acpAgent struct {
	a    *agent
	mu   sync.Mutex
	busy bool
	intr chan struct{} // closed by session/cancel
	n    int
	two  *acpTwoWay
}

// geminiACP runs the fake ACP agent until end of input and returns the
// exit status (see "Sessions" in the package documentation).
func (a *agent) geminiACP(rec recorder) int {
	if err := a.startSession(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	g := &acpAgent{a: a, two: newACPTwoWay(a.args)}
	defer g.two.clients.close()
	time.Sleep(a.s.SilentFor) // an agent slow to start: nothing is answered meanwhile
	readInput(a, rec, func(m *acpRPC) { g.handle(m) })
	return a.endOfInput(0)
}

func (g *acpAgent) reply(id json.RawMessage, result any) {
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}})
}

func (g *acpAgent) update(u obj) {
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"method", "session/update"}, {"params", obj{{"sessionId", g.a.sid}, {"update", u}}}})
}

func (g *acpAgent) handle(m *acpRPC) {
	if m.Method == "" && len(m.ID) > 0 {
		// The client's response to a request of the agent's.
		res := m.Result
		if len(m.Error) > 0 && string(m.Error) != "null" {
			res = json.RawMessage("null")
		}
		g.two.replies.deliver(string(m.ID), res)
		return
	}
	switch m.Method {
	case "initialize":
		g.reply(m.ID, obj{{"protocolVersion", 1}, {"authMethods", []obj{}},
			{"agentCapabilities", obj{{"loadSession", true}, {"mcpCapabilities", obj{{"http", true}, {"sse", true}}}}}})
	case "session/new", "session/load":
		if g.a.s.Fail != "" {
			// As Gemini answers when it cannot set a session up (a bad
			// API key, a session it cannot find).
			g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", m.ID}, {"error", obj{{"code", -32603}, {"message", "Internal error"},
				{"data", obj{{"details", g.a.s.Fail}}}}}})
			return
		}
		g.two.setServers(m.Params.MCPServers)
		if m.Params.SessionID != "" {
			g.a.sid = m.Params.SessionID
			g.reply(m.ID, nil)
			return
		}
		g.reply(m.ID, obj{{"sessionId", g.a.sid}, {"modes", obj{{"currentModeId", "default"}}}})
	case "session/set_mode":
		g.two.mu.Lock()
		g.two.mode = m.Params.ModeID
		g.two.mu.Unlock()
		g.update(obj{{"sessionUpdate", "current_mode_update"}, {"currentModeId", m.Params.ModeID}})
		g.reply(m.ID, obj{})
	case "session/prompt":
		var parts []string
		for _, p := range m.Params.Prompt {
			if p.Type == "text" {
				parts = append(parts, p.Text)
			}
		}
		g.mu.Lock()
		if g.busy {
			g.mu.Unlock()
			g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", m.ID}, {"error", obj{{"code", -32603}, {"message", "a prompt is already running"}}}})
			return
		}
		g.busy = true
		g.n++
		g.intr = make(chan struct{})
		n, intr := g.n, g.intr
		g.mu.Unlock()
		go g.prompt(m.ID, n, strings.Join(parts, "\n"), intr)
	case "session/cancel":
		if g.a.s.IgnoreInterrupt {
			return
		}
		g.mu.Lock()
		if g.busy && g.intr != nil {
			close(g.intr)
			g.intr = nil
		}
		g.mu.Unlock()
	default:
		if len(m.ID) > 0 {
			g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", m.ID}, {"error", obj{{"code", -32601}, {"message", "Method not found: " + m.Method}}}})
		}
	}
}

// prompt runs turn n and answers the prompt request with its stop reason.
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
		if stop == "end_turn" {
			res = append(res, kv{"_meta", obj{{"quota", obj{{"token_count", obj{{"input_tokens", in}, {"output_tokens", out}}}}}}})
		}
		g.reply(id, res)
	}
	if sc.Tool {
		tid := "run_shell_command__run_shell_command_" + randHex(6)
		g.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"status", "in_progress"},
			{"title", toolCommand}, {"content", []obj{}}, {"kind", "execute"}})
		g.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
			{"title", toolCommand}, {"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", toolOutput}}}}}},
			{"kind", "execute"}})
	}
	var outs outcomes
	if sc.twoWay() {
		ctx, cancel := stopOn(intr)
		var err error
		outs, err = g.acpActions(ctx)
		cancel()
		if err != nil {
			finish("cancelled", 0, 0)
			return
		}
	}
	if sc.StreamFor > 0 {
		stop := time.Now().Add(sc.StreamFor)
		for k := 0; time.Now().Before(stop); k++ {
			g.update(obj{{"sessionUpdate", "agent_thought_chunk"}, {"content", obj{{"type", "text"}, {"text", fmt.Sprintf("Working, step %d.", k+1)}}}})
			if !pause(sc.interval()) {
				finish("cancelled", 0, 0)
				return
			}
		}
	}
	answer := outs.answer(sc, n)
	for i, piece := range split(answer, sc.Chunks) {
		if i > 0 && !pause(sc.interval()) {
			finish("cancelled", 0, 0)
			return
		}
		g.update(obj{{"sessionUpdate", "agent_message_chunk"}, {"content", obj{{"type", "text"}, {"text", piece}}}})
		if strings.Contains(prompt, PromptDie) {
			os.Exit(3)
		}
	}
	if strings.Contains(prompt, PromptStall) && !pause(sleepFor) {
		finish("cancelled", 0, 0)
		return
	}
	if !pause(sc.StallFor) {
		finish("cancelled", 0, 0)
		return
	}
	if sc.NoTerminal {
		os.Exit(sc.ExitCode) // an agent that dies mid-turn: no response to the prompt
	}
	finish("end_turn", tokens(prompt), tokens(answer))
}
