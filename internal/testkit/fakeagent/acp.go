package fakeagent

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// ACPOptions are what an agent of the Agent Client Protocol (the ACP
// flavour, or the Gemini flavour with --acp) does beyond what the Script
// says for every flavour; the zero value is Gemini CLI's agent, or for the
// ACP flavour a plain one named "fakeacp".
type ACPOptions struct {
	// AgentName is initialize's agentInfo.name: "" means "fakeacp" for
	// the ACP flavour, and no agentInfo for Gemini's. "gemini-cli" says
	// the agent is Gemini CLI, whose tool call ids a client may read for
	// the tool's name (CallTool's id proves its server's tool).
	AgentName string `json:"agent_name,omitempty"`
	// ProtocolVersion is the version initialize answers (default 1).
	ProtocolVersion int `json:"protocol_version,omitempty"`
	// SilentInit never answers initialize.
	SilentInit bool `json:"silent_init,omitempty"`
	// NoLoadSession advertises loadSession false.
	NoLoadSession bool `json:"no_load_session,omitempty"`
	// NoMCPHTTP advertises mcpCapabilities.http false.
	NoMCPHTTP bool `json:"no_mcp_http,omitempty"`
	// AuthMethods are listed in initialize; with RequireAuth, session/new
	// fails with -32000 until authenticate named one.
	AuthMethods []AuthMethod `json:"auth_methods,omitempty"`
	RequireAuth bool         `json:"require_auth,omitempty"`
	// Modes are the session's modes, the first current: session/set_mode
	// takes no other. None means Gemini CLI's, which takes any mode.
	Modes []string `json:"modes,omitempty"`
	// Models are the session's models, the first current, listed in
	// session/new's models, or with ConfigModel as a model config option
	// (session/set_config_option); none means no choice of model.
	Models      []string `json:"models,omitempty"`
	ConfigModel bool     `json:"config_model,omitempty"`
	// ReportState sends, first in each turn, a thought "mode=M model=X"
	// naming the session's mode and model.
	ReportState bool `json:"report_state,omitempty"`
	// Thought is sent as an agent_thought_chunk before the answer.
	Thought string `json:"thought,omitempty"`
	// Permission, when set, reports a pending tool call of this ACP kind
	// and asks session/request_permission for it (options allow_once
	// "allow", allow_always "always", reject_once "reject"; a call of a
	// kind that changes files, edit, delete or move, names the file
	// permission.txt of the working directory in its locations); the call
	// completes when allowed, fails otherwise, and a thought says
	// "permission KIND: OPTION" (or "permission KIND: cancelled").
	// PermissionTitle is the call's title (default "a KIND call"),
	// PermissionInput its rawInput, when set.
	Permission      string         `json:"permission,omitempty"`
	PermissionTitle string         `json:"permission_title,omitempty"`
	PermissionInput map[string]any `json:"permission_input,omitempty"`
	// ClientRequest, when set, is a method the agent asks the client for
	// (fs/read_text_file, terminal/create, ...); a thought then says
	// "METHOD: error CODE" or "METHOD: result".
	ClientRequest string `json:"client_request,omitempty"`
	// StopReason is the prompt response's stop reason (default end_turn).
	StopReason string `json:"stop_reason,omitempty"`
	// Break breaks the protocol in each turn: "text" prints a line that is
	// not JSON and "object" a JSON object that is no JSON-RPC message,
	// before the answer; "result" answers the prompt with a result that
	// is no object.
	Break string `json:"break,omitempty"`
}

// An AuthMethod is an authentication method an ACP agent lists.
type AuthMethod struct {
	ID string `json:"id"`
	// Type is "env_var" or "" (the agent's own).
	Type string `json:"type,omitempty"`
	// Vars are the variables of an env_var method.
	Vars []string `json:"vars,omitempty"`
}

// isACP reports whether the fake speaks the Agent Client Protocol: the ACP
// flavour always, Gemini CLI with --acp.
func isACP(flavor string, args []string) bool {
	switch flavor {
	case ACP:
		return true
	case Gemini:
		return slices.ContainsFunc(args, func(a string) bool { return a == "--acp" || a == "--experimental-acp" })
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
		ModelID   string `json:"modelId"`
		Value     string `json:"value"`
		MethodID  string `json:"methodId"`
		Cwd       string `json:"cwd"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
		MCPServers []acpMCPServer `json:"mcpServers"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// acpAgent is one run of the fake ACP agent.
type acpAgent struct {
	a      *agent
	o      *ACPOptions
	gemini bool // the agent is Gemini CLI's, with its ids, usage and modes
	two    *acpTwoWay

	mu     sync.Mutex
	busy   bool
	intr   chan struct{} // closed by session/cancel
	n      int
	authed bool
	model  string
	cwd    string
	// calls are the agent's requests of the client other than questions
	// (ClientRequest), by id.
	calls map[string]chan *acpRPC
}

// acpSession runs the fake ACP agent until end of input and returns the
// exit status (see "Sessions" in the package documentation).
func (a *agent) acpSession(rec recorder) int {
	if err := a.startSession(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	g := &acpAgent{a: a, o: &a.s.ACP, gemini: a.s.flavor() == Gemini, two: newACPTwoWay(a.args), calls: map[string]chan *acpRPC{}}
	g.two.byMode = g.gemini
	if len(g.o.Modes) > 0 {
		g.two.mode = g.o.Modes[0]
	}
	if len(g.o.Models) > 0 {
		g.model = g.o.Models[0]
	}
	defer g.two.clients.close()
	time.Sleep(a.s.SilentFor) // an agent slow to start: nothing is answered meanwhile
	readInput(a, rec, func(m *acpRPC) { g.handle(m) })
	return a.endOfInput(0)
}

func (g *acpAgent) reply(id json.RawMessage, result any) {
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}})
}

func (g *acpAgent) fail(id json.RawMessage, code int, msg string, data any) {
	e := obj{{"code", code}, {"message", msg}}
	if data != nil {
		e = append(e, kv{"data", data})
	}
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"error", e}})
}

func (g *acpAgent) update(u obj) {
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"method", "session/update"}, {"params", obj{{"sessionId", g.a.sid}, {"update", u}}}})
}

func (g *acpAgent) chunk(kind, text string) {
	g.update(obj{{"sessionUpdate", kind}, {"content", obj{{"type", "text"}, {"text", text}}}})
}

func (g *acpAgent) handle(m *acpRPC) {
	if m.Method == "" && len(m.ID) > 0 {
		g.answered(m)
		return
	}
	switch m.Method {
	case "initialize":
		if !g.o.SilentInit {
			g.reply(m.ID, g.initialize())
		}
	case "authenticate":
		g.authenticate(m)
	case "session/new", "session/load":
		g.newSession(m)
	case "session/set_mode":
		g.setMode(m)
	case "session/set_model", "session/set_config_option":
		if len(g.o.Models) == 0 || (m.Method == "session/set_config_option") != g.o.ConfigModel {
			g.fail(m.ID, -32601, "Method not found", nil)
			return
		}
		g.mu.Lock()
		g.model = m.Params.ModelID + m.Params.Value
		g.mu.Unlock()
		g.reply(m.ID, obj{})
	case "session/prompt":
		g.startPrompt(m)
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
			g.fail(m.ID, -32601, "Method not found", m.Method)
		}
	}
}

// answered takes the client's response to a request of the agent's.
func (g *acpAgent) answered(m *acpRPC) {
	g.mu.Lock()
	ch := g.calls[string(m.ID)]
	delete(g.calls, string(m.ID))
	g.mu.Unlock()
	if ch != nil {
		ch <- m
		return
	}
	res := m.Result
	if m.Error != nil {
		res = json.RawMessage("null")
	}
	g.two.replies.deliver(string(m.ID), res)
}

// initialize returns the initialize response.
func (g *acpAgent) initialize() obj {
	methods := []obj{}
	for _, am := range g.o.AuthMethods {
		o := obj{{"id", am.ID}, {"name", "Method " + am.ID}}
		if am.Type != "" {
			var vars []obj
			for _, name := range am.Vars {
				vars = append(vars, obj{{"name", name}})
			}
			o = append(o, kv{"type", am.Type}, kv{"vars", vars})
		}
		methods = append(methods, o)
	}
	version := g.o.ProtocolVersion
	if version == 0 {
		version = 1
	}
	res := obj{{"protocolVersion", version}, {"authMethods", methods},
		{"agentCapabilities", obj{{"loadSession", !g.o.NoLoadSession}, {"promptCapabilities", obj{{"image", false}}},
			{"mcpCapabilities", obj{{"http", !g.o.NoMCPHTTP}, {"sse", g.gemini}}}}}}
	name := g.o.AgentName
	if name == "" && !g.gemini {
		name = "fakeacp"
	}
	if name != "" {
		res = append(res, kv{"agentInfo", obj{{"name", name}, {"version", "1.0.0"}}})
	}
	return res
}

func (g *acpAgent) authenticate(m *acpRPC) {
	for _, am := range g.o.AuthMethods {
		if am.ID == m.Params.MethodID {
			g.mu.Lock()
			g.authed = true
			g.mu.Unlock()
			g.reply(m.ID, obj{})
			return
		}
	}
	g.fail(m.ID, -32602, "Invalid params", "unknown auth method "+m.Params.MethodID)
}

// newSession answers session/new or session/load, taking the session's
// working directory and MCP servers.
func (g *acpAgent) newSession(m *acpRPC) {
	if g.gemini && g.a.s.Fail != "" {
		// As Gemini answers when it cannot set a session up (a bad API
		// key, a session it cannot find).
		g.fail(m.ID, -32603, "Internal error", obj{{"details", g.a.s.Fail}})
		return
	}
	g.mu.Lock()
	authed := g.authed
	g.cwd = m.Params.Cwd
	g.mu.Unlock()
	if g.o.RequireAuth && !authed {
		g.fail(m.ID, -32000, "Authentication required", nil)
		return
	}
	g.two.setServers(m.Params.MCPServers)
	if m.Method == "session/load" {
		g.a.sid = m.Params.SessionID
		if g.gemini {
			g.reply(m.ID, nil)
			return
		}
	}
	res := obj{}
	if m.Method == "session/new" {
		res = append(res, kv{"sessionId", g.a.sid})
	}
	res = append(res, g.modesAndModels()...)
	g.reply(m.ID, res)
}

// modesAndModels are the modes and models session/new reports.
func (g *acpAgent) modesAndModels() obj {
	var res obj
	switch {
	case len(g.o.Modes) > 0:
		var modes []obj
		for _, id := range g.o.Modes {
			modes = append(modes, obj{{"id", id}, {"name", id}})
		}
		res = append(res, kv{"modes", obj{{"currentModeId", g.o.Modes[0]}, {"availableModes", modes}}})
	case g.gemini:
		res = append(res, kv{"modes", obj{{"currentModeId", "default"}}})
	}
	switch {
	case len(g.o.Models) == 0:
	case g.o.ConfigModel:
		var opts []obj
		for _, id := range g.o.Models {
			opts = append(opts, obj{{"value", id}, {"name", id}})
		}
		res = append(res, kv{"configOptions", []obj{{{"id", "model"}, {"name", "Model"}, {"category", "model"},
			{"type", "select"}, {"currentValue", g.o.Models[0]}, {"options", opts}}}})
	default:
		var models []obj
		for _, id := range g.o.Models {
			models = append(models, obj{{"modelId", id}, {"name", id}})
		}
		res = append(res, kv{"models", obj{{"currentModelId", g.o.Models[0]}, {"availableModels", models}}})
	}
	return res
}

func (g *acpAgent) setMode(m *acpRPC) {
	if len(g.o.Modes) > 0 && !slices.Contains(g.o.Modes, m.Params.ModeID) {
		g.fail(m.ID, -32602, "Invalid params", "unknown mode "+m.Params.ModeID)
		return
	}
	g.two.mu.Lock()
	g.two.mode = m.Params.ModeID
	g.two.mu.Unlock()
	g.update(obj{{"sessionUpdate", "current_mode_update"}, {"currentModeId", m.Params.ModeID}})
	g.reply(m.ID, obj{})
}

// startPrompt starts the turn of a session/prompt, unless one runs.
func (g *acpAgent) startPrompt(m *acpRPC) {
	var parts []string
	for _, p := range m.Params.Prompt {
		if p.Type == "text" {
			parts = append(parts, p.Text)
		}
	}
	g.mu.Lock()
	if g.busy {
		g.mu.Unlock()
		g.fail(m.ID, -32603, "Internal error", "a prompt is already running")
		return
	}
	g.busy = true
	g.n++
	g.intr = make(chan struct{})
	n, intr := g.n, g.intr
	g.mu.Unlock()
	go g.prompt(m.ID, n, strings.Join(parts, "\n"), intr)
}

// request sends a request of the agent's to the client and returns the
// channel of its response.
func (g *acpAgent) request(method string, params any) <-chan *acpRPC {
	id := fmt.Sprintf("fake-%d", g.two.replies.newID())
	ch := make(chan *acpRPC, 1)
	g.mu.Lock()
	g.calls[`"`+id+`"`] = ch
	g.mu.Unlock()
	g.a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}})
	return ch
}
