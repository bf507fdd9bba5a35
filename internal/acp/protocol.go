package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// A Protocol speaks ACP for one session. Make one per session with New;
// the engine calls its methods from one goroutine at a time.
type Protocol struct {
	cfg *Config
	req invoker.SessionRequest

	next    int64 // the id of the client's last request
	pending map[int64]replyFunc

	// What the handshake established.
	caps        agentCaps
	initLine    json.RawMessage // the initialize response, shown in the first turn
	initShown   bool
	session     string
	sessionLine json.RawMessage // the session/new or session/load response
	perm        invoker.Permission
	mode        string // the mode in force, as far as the client knows
	openMode    string // the mode the session opened in
	model       string
	modelCfg    string // the id of the config option of category "model"
	hasModels   bool   // session/new listed models: session/set_model works

	turn   turnState
	broken bool // Decode returned a fatal error

	// ws judges the paths of the edits the agent asks for.
	ws *workspace.Root
	// asking holds the requests for permission waiting for the program's
	// decision, by their JSON-RPC id (requestKey), with the lines that
	// withdraw and reject each.
	asking map[string]*waiting
	// granted holds the edits the program allowed for the session below
	// Unlimited, by kind and tool name (grantKey): the agent was answered
	// once, and a later request of the same tool, judged by the level,
	// is allowed once without asking the program.
	granted map[string]bool
	// names reads the names of MCP tools, knowing the tools of the
	// request's Go servers (see servers.go).
	names *mcphost.Names
}

var (
	_ driver.SessionProtocol = (*Protocol)(nil)
)

// firstTurnID is the lowest id of a turn's request: the ids below are the
// handshake's (initialize, session/new, session/set_mode), so that a
// session's turns have the same ids with and without a mode to set.
const firstTurnID = 4

// replyFunc handles the response to one of the client's requests.
type replyFunc func(m *message, raw json.RawMessage) (driver.Step, error)

// agentCaps is the part of the initialize response the client uses.
type agentCaps struct {
	ProtocolVersion   *int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession     bool `json:"loadSession"`
		MCPCapabilities struct {
			HTTP bool `json:"http"`
			SSE  bool `json:"sse"`
		} `json:"mcpCapabilities"`
	} `json:"agentCapabilities"`
	AuthMethods []authMethod `json:"authMethods"`
	AgentInfo   struct {
		Name string `json:"name"`
	} `json:"agentInfo"`
}

type authMethod struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Vars []struct {
		Name     string `json:"name"`
		Optional bool   `json:"optional"`
	} `json:"vars"`
}

// New returns the protocol of one session of req, for the agent cfg
// describes.
func New(cfg *Config, req *invoker.SessionRequest) *Protocol {
	p := &Protocol{cfg: cfg, req: *req, pending: make(map[int64]replyFunc), perm: req.Permission,
		ws: workspace.New(req.Workdir, req.Env), asking: make(map[string]*waiting), granted: make(map[string]bool)}
	p.turn.calls = make(map[string]toolState)
	p.names = mcphost.NewNames(req.MCPServers)
	return p
}

// call returns the line of a request of the client and registers the
// handler of its response.
func (p *Protocol) call(method string, params any, reply replyFunc) []byte {
	p.next++
	p.pending[p.next] = reply
	return request(p.next, method, params)
}

// Open sends initialize. No file system and no terminal are offered, so
// that the agent does not ask for them.
func (p *Protocol) Open() ([][]byte, bool) {
	return [][]byte{p.call("initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	}, p.initialized)}, false
}

func (p *Protocol) initialized(m *message, raw json.RawMessage) (driver.Step, error) {
	if m.Error != nil {
		msg := m.Error.text()
		return driver.Step{}, &invoker.StreamError{Message: p.cfg.name() + " refused initialize: " + msg, Type: "initialize", Err: p.cfg.classify(m.Error)}
	}
	if err := json.Unmarshal(m.Result, &p.caps); err != nil {
		return driver.Step{}, protocolError("the response to initialize does not decode: %v", err)
	}
	if p.caps.ProtocolVersion == nil {
		return driver.Step{}, protocolError("the response to initialize has no protocolVersion")
	}
	if v := *p.caps.ProtocolVersion; v != ProtocolVersion {
		return driver.Step{}, &VersionError{Client: ProtocolVersion, Agent: v}
	}
	p.initLine = raw
	id, err := p.authMethod()
	if err != nil {
		return driver.Step{}, err
	}
	if id == "" {
		return p.openSession()
	}
	line := p.call("authenticate", map[string]string{"methodId": id}, func(m *message, _ json.RawMessage) (driver.Step, error) {
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("%w: %s refused authentication with method %q: %s", invoker.ErrAuthRequired, p.cfg.name(), id, m.Error.text())
		}
		return p.openSession()
	})
	return driver.Step{Write: [][]byte{line}}, nil
}

// authMethod chooses the authentication method: Config.AuthMethod when
// the agent lists it, else an env_var method whose variables are set.
func (p *Protocol) authMethod() (string, error) {
	methods := p.caps.AuthMethods
	if want := p.cfg.AuthMethod; want != "" {
		var ids []string
		for _, m := range methods {
			if m.ID == want {
				return want, nil
			}
			ids = append(ids, m.ID)
		}
		if len(methods) == 0 {
			return "", nil // the agent needs no authentication
		}
		return "", fmt.Errorf("%w: authentication method %q is not one of %s's: %s", invoker.ErrInvalidRequest, want, p.cfg.name(), strings.Join(ids, ", "))
	}
	for _, m := range methods {
		if m.Type == "env_var" && len(m.Vars) > 0 && p.satisfied(m) {
			return m.ID, nil
		}
	}
	return "", nil
}

func (p *Protocol) satisfied(m authMethod) bool {
	if p.cfg.LookupEnv == nil {
		return false
	}
	for _, v := range m.Vars {
		if val, ok := p.cfg.LookupEnv(v.Name); !v.Optional && (!ok || val == "") {
			return false
		}
	}
	return true
}

// openSession sends session/new, or session/load to resume.
func (p *Protocol) openSession() (driver.Step, error) {
	servers, err := p.mcpServers()
	if err != nil {
		return driver.Step{}, err
	}
	params := map[string]any{"cwd": p.req.Workdir, "mcpServers": servers}
	method := "session/new"
	if id := p.req.SessionID; id != "" {
		if !p.caps.AgentCapabilities.LoadSession {
			return driver.Step{}, fmt.Errorf("%w: %s does not advertise loadSession in its initialize response, so it cannot resume session %s: open a new session", invoker.ErrUnsupported, p.cfg.name(), id)
		}
		method = "session/load"
		params["sessionId"] = id
	}
	return driver.Step{Write: [][]byte{p.call(method, params, func(m *message, raw json.RawMessage) (driver.Step, error) {
		return p.opened(method, m, raw)
	})}}, nil
}

// sessionState is the part of the session/new and session/load responses
// the client uses.
type sessionState struct {
	SessionID string `json:"sessionId"`
	Modes     *struct {
		CurrentModeID string `json:"currentModeId"`
	} `json:"modes"`
	Models *struct {
		CurrentModelID string `json:"currentModelId"`
	} `json:"models"`
	ConfigOptions []struct {
		ID           string          `json:"id"`
		Category     string          `json:"category"`
		CurrentValue json.RawMessage `json:"currentValue"`
	} `json:"configOptions"`
}

func (p *Protocol) opened(method string, m *message, raw json.RawMessage) (driver.Step, error) {
	if m.Error != nil {
		msg := m.Error.text()
		if m.Error.Code == codeAuthRequired {
			var ids []string
			for _, a := range p.caps.AuthMethods {
				ids = append(ids, a.ID)
			}
			return driver.Step{}, fmt.Errorf("%w: %s: %s (its authentication methods: %s; choose one with Agent.AuthMethod, or set its variables)", invoker.ErrAuthRequired, method, msg, strings.Join(ids, ", "))
		}
		return driver.Step{}, &invoker.StreamError{Message: p.cfg.name() + " could not open a session: " + msg, Type: method, Err: p.cfg.classify(m.Error)}
	}
	var st sessionState
	if len(m.Result) > 0 && string(m.Result) != "null" {
		if err := json.Unmarshal(m.Result, &st); err != nil {
			return driver.Step{}, protocolError("the response to %s does not decode: %v", method, err)
		}
	}
	if method == "session/load" {
		st.SessionID = p.req.SessionID
	}
	if st.SessionID == "" {
		return driver.Step{}, protocolError("the response to session/new has no sessionId")
	}
	p.session, p.sessionLine = st.SessionID, raw
	if st.Modes != nil {
		p.mode, p.openMode = st.Modes.CurrentModeID, st.Modes.CurrentModeID
	}
	if st.Models != nil {
		p.hasModels, p.model = true, st.Models.CurrentModelID
	}
	for _, o := range st.ConfigOptions {
		if o.Category == "model" {
			p.modelCfg = o.ID
			json.Unmarshal(o.CurrentValue, &p.model)
		}
	}
	calls, err := p.switches(p.req.Permission, p.req.Model)
	if err != nil {
		return driver.Step{}, err
	}
	var step driver.Step
	if method == "session/load" {
		step = p.awaitReplay(calls)
	} else {
		step = p.ready(calls)
	}
	step.Events = []invoker.Event{{Kind: invoker.KindSession, SessionID: p.session, Raw: raw}}
	return step, nil
}

// ready returns the step that makes the session ready: at once, or once
// the agent accepted calls.
func (p *Protocol) ready(calls []rpcCall) driver.Step {
	if len(calls) == 0 {
		return driver.Step{Ready: true}
	}
	return driver.Step{Write: [][]byte{p.sequence(calls, func(*message, json.RawMessage) (driver.Step, error) {
		return driver.Step{Ready: true}, nil
	}, func(c rpcCall, e *rpcError, _ json.RawMessage) (driver.Step, error) {
		return driver.Step{}, fmt.Errorf("%s refused %s: %s", p.cfg.name(), c.what, e.text())
	})}}
}

// An rpcCall is one call of a sequence (sequence).
type rpcCall struct {
	method string
	params any
	what   string // what the call asks, for messages
	done   func() // called when the agent accepted it
}

// sequence returns the line of calls[0], and sends each next call once the
// agent accepted the one before; last makes the step after the last call,
// failed the step after a refusal.
func (p *Protocol) sequence(calls []rpcCall, last replyFunc, failed func(c rpcCall, e *rpcError, raw json.RawMessage) (driver.Step, error)) []byte {
	c := calls[0]
	return p.call(c.method, c.params, func(m *message, raw json.RawMessage) (driver.Step, error) {
		if m.Error != nil {
			return failed(c, m.Error, raw)
		}
		if c.done != nil {
			c.done()
		}
		if len(calls) == 1 {
			return last(m, raw)
		}
		return driver.Step{Write: [][]byte{p.sequence(calls[1:], last, failed)}}, nil
	})
}

// switches returns the calls that put the session in the mode of perm and
// on model (when not empty), if it is not there yet.
func (p *Protocol) switches(perm invoker.Permission, model string) ([]rpcCall, error) {
	var calls []rpcCall
	mode := p.cfg.Modes[perm]
	if p.req.Approve != nil {
		// The program decides what the agent asks about: no mode that
		// asks less (the level stays the ceiling, in permission).
		mode = ""
	}
	if mode == "" {
		mode = p.openMode
	}
	if mode != "" && mode != p.mode {
		calls = append(calls, rpcCall{
			method: "session/set_mode",
			params: map[string]string{"sessionId": p.session, "modeId": mode},
			what:   fmt.Sprintf("mode %q (for permission %s)", mode, perm),
			done:   func() { p.mode = mode },
		})
	}
	if model != "" && model != p.model {
		c := rpcCall{what: fmt.Sprintf("model %q", model), done: func() { p.model = model }}
		switch {
		case p.modelCfg != "":
			c.method = "session/set_config_option"
			c.params = map[string]string{"sessionId": p.session, "configId": p.modelCfg, "value": model}
		case p.hasModels:
			c.method = "session/set_model"
			c.params = map[string]string{"sessionId": p.session, "modelId": model}
		default:
			return nil, fmt.Errorf("%w: %s offers no choice of model (no models and no model config option in its session/new response): leave the model empty", invoker.ErrUnsupported, p.cfg.name())
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// StartTurn sends the turn's prompt, after the mode and model switches the
// turn asks for have been accepted.
func (p *Protocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	if p.cfg.CheckTurn != nil {
		if err := p.cfg.CheckTurn(t); err != nil {
			return nil, err
		}
	}
	perm := p.perm
	if t.Permission != "" {
		perm = t.Permission
	}
	calls, err := p.switches(perm, t.Model)
	if err != nil {
		return nil, err
	}
	// The level applies to the turn's requests for permission; a switch
	// the agent refuses leaves the session at the level it had.
	prev := p.perm
	p.perm = perm
	p.turn.reset()
	p.turn.inTurn = true
	// Turns are numbered from firstTurnID at the earliest, whatever the
	// handshake sent, as in the recorded sessions of Gemini CLI.
	p.next = max(p.next, firstTurnID-1)
	prompt := func() []byte {
		p.turn.promptSent = true
		return p.call("session/prompt", map[string]any{
			"sessionId": p.session,
			"prompt":    []map[string]string{{"type": "text", "text": t.Prompt}},
		}, p.finish)
	}
	if len(calls) == 0 {
		return [][]byte{prompt()}, nil
	}
	return [][]byte{p.sequence(calls, func(_ *message, raw json.RawMessage) (driver.Step, error) {
		if p.turn.cancelled {
			// Interrupted before the prompt was sent: the turn ends
			// here, as the agent would have ended it.
			p.turn.failure = &invoker.StreamError{Message: "the turn was cancelled before its prompt was sent", Type: "cancelled"}
			return p.endTurn(nil, raw), nil
		}
		return driver.Step{Write: [][]byte{prompt()}}, nil
	}, func(c rpcCall, e *rpcError, raw json.RawMessage) (driver.Step, error) {
		p.perm = prev
		msg := fmt.Sprintf("%s refused %s: %s", p.cfg.name(), c.what, e.text())
		p.turn.failure = &invoker.StreamError{Message: msg, Type: c.method, Err: p.cfg.classify(e)}
		return p.endTurn([]invoker.Event{{Kind: invoker.KindError, Text: msg, Raw: raw}}, raw), nil
	})}, nil
}

// Interrupt sends session/cancel. A turn whose prompt is not sent yet
// ends when the switch before it is answered.
func (p *Protocol) Interrupt() [][]byte {
	if !p.turn.inTurn || p.turn.cancelled {
		return nil
	}
	p.turn.cancelled = true
	if !p.turn.promptSent {
		return nil
	}
	// The requests for permission still waiting for the program are
	// answered cancelled after the cancel, as ACP asks.
	return append([][]byte{notification("session/cancel", map[string]string{"sessionId": p.session})}, p.withdraw()...)
}

// Decode handles one line of the agent's output. During a turn, the
// events of Config.Notices come first. After a fatal error it takes
// nothing more from the agent: the engine goes on reading while it stops
// the session, and a later line must not end the turn as if the session
// were sound.
func (p *Protocol) Decode(line []byte) (driver.Step, error) {
	if p.broken {
		return driver.Step{}, nil
	}
	st, err := p.decodeLine(line)
	if err != nil {
		p.broken = true
		return driver.Step{}, err
	}
	return st, nil
}

// decodeLine puts the notices of Config.Notices before the line's events.
func (p *Protocol) decodeLine(line []byte) (driver.Step, error) {
	raw := json.RawMessage(line)
	if p.turn.inTurn && p.cfg.Notices != nil {
		if pre := p.cfg.Notices(raw); len(pre) > 0 {
			pre = p.announce(append(p.turn.flush(raw), pre...), nil)
			st, err := p.decode(line, raw)
			st.Events = append(pre, st.Events...)
			return st, err
		}
	}
	return p.decode(line, raw)
}

func (p *Protocol) decode(line []byte, raw json.RawMessage) (driver.Step, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(line) {
			// Not JSON: a stray print, shown and skipped.
			return p.turnStep(driver.Malformed(line, err)), nil
		}
		return driver.Step{}, protocolError("a JSON value that is no JSON-RPC message: %.200s", line)
	}
	switch {
	case m.Method != "" && m.hasID():
		return p.request(&m, raw), nil
	case m.Method == "session/update":
		return p.update(m.Params, raw), nil
	case m.Method != "":
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	case !m.hasID():
		return driver.Step{}, protocolError("a JSON object that is no JSON-RPC message (no method, no id): %.200s", line)
	}
	id, ok := idKey(m.ID)
	reply := p.pending[id]
	if !ok || reply == nil {
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	}
	delete(p.pending, id)
	return reply(&m, raw)
}

// finish handles the response to session/prompt: the end of the turn.
func (p *Protocol) finish(m *message, raw json.RawMessage) (driver.Step, error) {
	t := &p.turn
	evs := t.flush(raw)
	if m.Error != nil {
		msg := m.Error.text()
		sentinel := p.cfg.classify(m.Error)
		t.failure = &invoker.StreamError{Message: msg, Type: "session/prompt", Err: sentinel}
		if sentinel == invoker.ErrRateLimited && p.cfg.ResetsAt != nil {
			t.resetsAt = p.cfg.ResetsAt(msg)
		}
		return p.endTurn(append(evs, invoker.Event{Kind: invoker.KindError, Text: msg, Raw: raw}), raw), nil
	}
	var r struct {
		StopReason string `json:"stopReason"`
		Usage      *struct {
			InputTokens       int64 `json:"inputTokens"`
			OutputTokens      int64 `json:"outputTokens"`
			TotalTokens       int64 `json:"totalTokens"`
			CachedReadTokens  int64 `json:"cachedReadTokens"`
			ThoughtTokens     int64 `json:"thoughtTokens"`
			CachedWriteTokens int64 `json:"cachedWriteTokens"`
		} `json:"usage"`
		Meta struct {
			// Gemini CLI's usage, before ACP had one.
			Quota struct {
				TokenCount *struct {
					InputTokens  int64 `json:"input_tokens"`
					OutputTokens int64 `json:"output_tokens"`
				} `json:"token_count"`
			} `json:"quota"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return driver.Step{}, protocolError("the response to session/prompt does not decode: %v", err)
	}
	switch u, tc := r.Usage, r.Meta.Quota.TokenCount; {
	case u != nil:
		t.usage = &invoker.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedReadTokens,
			OutputTokens: u.OutputTokens, ReasoningTokens: u.ThoughtTokens, TotalTokens: u.TotalTokens}
	case tc != nil:
		t.usage = &invoker.Usage{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens}
	}
	fail := func(msg string, sentinel error) {
		se := &invoker.StreamError{Message: msg, Type: r.StopReason, Err: sentinel}
		t.failure = se
		evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: msg, Raw: raw})
	}
	switch r.StopReason {
	case "end_turn":
		t.success = true
	case "cancelled":
		t.failure = &invoker.StreamError{Message: "the turn was cancelled", Type: "cancelled"}
	case "max_tokens":
		fail("the model reached its maximum number of tokens", ErrMaxTokens)
	case "refusal":
		fail("the agent refused to continue; the prompt is left out of the conversation", ErrRefusal)
	case "max_turn_requests":
		fail("the agent reached its limit of model requests for one turn", nil)
		t.failure = &invoker.LimitError{Limit: invoker.ErrMaxTurns, SessionID: p.session, Err: t.failure}
	case "":
		fail("the agent ended the turn without a stop reason", nil)
	default:
		fail("the turn stopped: "+r.StopReason, nil)
	}
	if t.usage != nil {
		u := *t.usage
		evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw})
	}
	return p.endTurn(evs, raw), nil
}

// endTurn ends the turn in flight with evs and the done event. A request
// for permission still waiting for the program is withdrawn.
func (p *Protocol) endTurn(evs []invoker.Event, raw json.RawMessage) driver.Step {
	evs = append(evs, invoker.Event{Kind: invoker.KindDone, Raw: raw})
	st := driver.Step{Events: p.announce(evs, raw), TurnEnded: true, Write: p.withdraw()}
	p.turn.inTurn = false
	return st
}

// turnStep returns evs as a step of the turn in flight, or nothing between
// turns (the replay of a loaded session's history, notices after a turn).
func (p *Protocol) turnStep(evs ...invoker.Event) driver.Step {
	if !p.turn.inTurn {
		return driver.Step{}
	}
	return driver.Step{Events: p.announce(evs, nil)}
}

// announce puts, before the first events of a turn, the session event (and
// in the session's first turn, the initialize response as a raw event),
// as a one-turn run of another CLI opens with its session.
func (p *Protocol) announce(evs []invoker.Event, raw json.RawMessage) []invoker.Event {
	if p.turn.announced || len(evs) == 0 {
		return evs
	}
	p.turn.announced = true
	var head []invoker.Event
	if !p.initShown && p.initLine != nil {
		p.initShown = true
		head = append(head, invoker.Event{Kind: invoker.KindRaw, Raw: p.initLine})
	}
	sraw := p.sessionLine
	if sraw == nil {
		sraw = raw
	}
	head = append(head, invoker.Event{Kind: invoker.KindSession, SessionID: p.session, Raw: sraw})
	return append(head, evs...)
}

// Stderr hands the line to Config.Stderr.
func (p *Protocol) Stderr(line []byte) error {
	if p.cfg.Stderr == nil {
		return nil
	}
	return p.cfg.Stderr(line)
}

// Outcome reports what the turn established: the session, the answer (or
// the partial answer of a turn cut short), the usage, and how it ended.
func (p *Protocol) Outcome(string) driver.Outcome {
	t := &p.turn
	out := driver.Outcome{SessionID: p.session, Text: t.answer(), Success: t.success, ResetsAt: t.resetsAt}
	if t.usage != nil {
		out.Usage = *t.usage
	}
	if !t.success && t.failure != nil {
		out.Err = t.failure
	}
	return out
}
