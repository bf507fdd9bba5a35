package gemini

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// Sessions (Invoker.OpenSession) run
//
//	gemini --acp [--model=M] [ExtraArgs...]
//
// which speaks the Agent Client Protocol (JSON-RPC 2.0, one message per
// line) on standard input and output (measured with 0.61.0 in
// docs/session-protocols.md). The session sends initialize (no file system
// or terminal offered to the agent), then session/new in Workdir, then, for
// WorkspaceWrite and Unlimited, session/set_mode "autoEdit" or "yolo". A
// session cannot resume one (Request.SessionID): session/load of 0.61.0
// does not load a saved conversation reliably (e2e's
// TestGeminiSessionLoadProbe); resume with Invoke, whose --resume works,
// also for the id of a session opened here. Each turn is a
// session/prompt, whose response ends the turn with its stop reason; the
// turn's events are the session/update notifications (agent message and
// thought chunks, tool calls and their updates). A cancelled turn is
// stopped with session/cancel; Gemini kills the turn's tools itself.
//
// In ACP's default mode Gemini declares its shell tool and asks for
// permission before each call that changes anything (session/request_permission);
// the session answers as Permission says: ReadOnly allows reading, searching
// and fetching only, WorkspaceWrite also editing, deleting and moving files,
// Unlimited (whose yolo mode asks nothing) everything. Gemini's cold start
// is slow (initialize answered after 3.4–3.9 s on an idle machine), which a
// session pays once.
//
// A turn streams agent_message_chunk and agent_thought_chunk updates as
// KindDelta events (of KindMessage and KindReasoning); each message or
// thought then comes whole, once, before the next event of another kind
// (a tool call, the turn's end, a cancelled one's included).
//
// TurnRequest.Model and TurnRequest.Permission switch the session from
// that turn on with ACP's own requests: session/set_model (Gemini's
// unstable_setSessionModel, offered when session/new answers with models;
// Gemini takes any model id there, as it takes any --model), and
// session/set_mode with the mode of the level ("default" for ReadOnly,
// "autoEdit", "yolo"), after which the session also answers permission
// requests at the new level. Gemini handles requests concurrently, so the
// turn's session/prompt is sent only once Gemini has answered every
// switch; a refused switch ends the turn with its error before the prompt.
// Gemini streams "[MODE_UPDATE] MODE" as an agent message when its mode
// changes; that notice is no text of the turn.

var _ driver.SessionBackend = backend{}

// SessionCommand starts Gemini's ACP mode.
func (backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	if _, err := approvalMode(req.Permission); err != nil {
		return nil, err
	}
	if req.SessionID != "" {
		// session/load of a conversation saved in the same home and
		// workdir answers "No previous sessions found for this
		// project." in most tries and loads it in others (e2e's
		// TestGeminiSessionLoadProbe).
		return nil, driver.Unsupported("SessionID", "gemini 0.61.0's ACP mode does not reliably load a saved session; resume it with Invoke (Request.SessionID), one process per turn")
	}
	args := []string{"--acp"}
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	return &driver.Command{Args: append(args, req.ExtraArgs...)}, nil
}

// NewSessionProtocol returns the ACP driver of one session.
func (backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	return &acp{workdir: req.Workdir, perm: req.Permission, model: req.Model, next: modeID,
		calls: make(map[string]call), switches: make(map[int64]change), now: time.Now}
}

// Request ids of the session's own calls.
const (
	initID = 1
	openID = 2
	modeID = 3
)

// acpModes are the ACP session modes of the permission levels above
// ReadOnly, which is Gemini's "default" mode: the one a session opens in.
var acpModes = map[invoker.Permission]string{invoker.WorkspaceWrite: "autoEdit", invoker.Unlimited: "yolo"}

// acpMode returns the session mode of a permission level.
func acpMode(p invoker.Permission) string {
	if m := acpModes[p]; m != "" {
		return m
	}
	return "default"
}

type acp struct {
	workdir string
	perm    invoker.Permission // the level the session answers and runs at now
	model   string             // the model in use, "" for Gemini's default
	// models reports that session/new offered models to choose from,
	// which session/set_model switches between.
	models  bool
	next    int64
	session string
	now     func() time.Time

	// switches are the session/set_mode and session/set_model requests
	// sent and not answered yet, by request id.
	switches map[int64]change

	// The turn in flight.
	inTurn    bool
	promptID  int64
	announced bool // the turn's session event was sent
	// prompt is the turn's session/prompt, held until Gemini has
	// answered the turn's switches; nil once it is sent.
	prompt []byte
	// cancelled: the turn was interrupted before its prompt was sent.
	cancelled bool
	// modeNote is the text Gemini streams as an agent message when a
	// switch changes the mode ("[MODE_UPDATE] yolo"): a notice of the
	// switch, not the model's.
	modeNote  string
	text      strings.Builder
	msg       strings.Builder // the agent message being streamed
	thought   strings.Builder // the thought being streamed
	afterTool bool
	usage     invoker.Usage
	success   bool
	failure   *invoker.StreamError
	resetsAt  time.Time
	retries   retryLog
	calls     map[string]call
}

// A change is a switch of the session's model or permission level that
// takes effect when Gemini answers its request.
type change struct {
	method string // "session/set_mode" or "session/set_model"
	perm   invoker.Permission
	model  string
}

type acpMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *acpError       `json:"error"`
}

// acpError is a JSON-RPC error; Gemini puts the reason in data.details
// and only "Internal error" in the message.
type acpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Details string `json:"details"`
	} `json:"data"`
}

func (e *acpError) text() string {
	if e.Data.Details != "" {
		return e.Message + ": " + e.Data.Details
	}
	return e.Message
}

func rpcCall(id int64, method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

func (p *acp) Open() ([][]byte, bool) {
	return [][]byte{rpcCall(initID, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	})}, false
}

func (p *acp) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	if n := utf16Len(t.Prompt); n > maxStdin {
		// Not a limit of ACP; kept so that a prompt Invoke refuses is
		// not accepted here.
		return nil, fmt.Errorf("%w: the prompt is %d UTF-16 code units long; gemini takes at most %d", invoker.ErrInvalidRequest, n, maxStdin)
	}
	var lines [][]byte
	if t.Model != "" && t.Model != p.model {
		if !p.models {
			return nil, fmt.Errorf("%w: gemini offered no models to switch between in this session (session/new has no models)", invoker.ErrUnsupported)
		}
		p.next++
		p.switches[p.next] = change{method: "session/set_model", model: t.Model}
		lines = append(lines, rpcCall(p.next, "session/set_model", map[string]string{"sessionId": p.session, "modelId": t.Model}))
	}
	p.modeNote = ""
	if t.Permission != "" && t.Permission != p.perm && acpMode(t.Permission) != acpMode(p.perm) {
		p.next++
		p.switches[p.next] = change{method: "session/set_mode", perm: t.Permission}
		p.modeNote = "[MODE_UPDATE] " + acpMode(t.Permission)
		lines = append(lines, rpcCall(p.next, "session/set_mode", map[string]string{"sessionId": p.session, "modeId": acpMode(t.Permission)}))
	} else if t.Permission != "" {
		p.perm = t.Permission // the same mode: only the answers change
	}
	p.next++
	p.inTurn, p.promptID, p.announced, p.cancelled = true, p.next, false, false
	p.text.Reset()
	p.msg.Reset()
	p.thought.Reset()
	p.afterTool, p.usage, p.success, p.failure, p.resetsAt = false, invoker.Usage{}, false, nil, time.Time{}
	p.retries = retryLog{}
	clear(p.calls)
	prompt := rpcCall(p.promptID, "session/prompt", map[string]any{
		"sessionId": p.session,
		"prompt":    []map[string]string{{"type": "text", "text": t.Prompt}},
	})
	if len(lines) == 0 {
		return [][]byte{prompt}, nil
	}
	// Gemini handles requests concurrently: the prompt goes once the
	// switches have taken effect (switched).
	p.prompt = prompt
	return lines, nil
}

func (p *acp) Interrupt() [][]byte {
	if !p.inTurn {
		return nil
	}
	if p.prompt != nil {
		// Nothing runs yet: the turn ends, cancelled, when the switches
		// are answered, instead of sending the prompt.
		p.cancelled = true
		return nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]string{"sessionId": p.session}})
	return [][]byte{b}
}

// Decode handles one line of Gemini's. The retries of model requests
// that stderr reported since the last line come first, as warnings (see
// retryLog).
func (p *acp) Decode(line []byte) (driver.Step, error) {
	var pre []invoker.Event
	if p.inTurn {
		if pre = p.retries.events(json.RawMessage(line)); len(pre) > 0 {
			pre = p.announce(append(p.endChunks(line), pre...))
		}
	}
	st, err := p.decode(line)
	if len(pre) > 0 {
		st.Events = append(pre, st.Events...)
	}
	return st, err
}

func (p *acp) decode(line []byte) (driver.Step, error) {
	raw := json.RawMessage(line)
	var m acpMessage
	if err := json.Unmarshal(line, &m); err != nil {
		// Gemini prints nothing but JSON-RPC on stdout in ACP mode;
		// anything else is shown, not fatal.
		return p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: "gemini printed a line that is not JSON-RPC: " + err.Error()}), nil
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return p.request(&m, raw), nil
	case m.Method == "session/update":
		if !p.inTurn {
			return driver.Step{}, nil // history replayed by session/load, mode notices
		}
		evs := p.update(m.Params, raw)
		if len(evs) == 0 {
			return driver.Step{}, nil
		}
		return driver.Step{Events: p.announce(evs)}, nil
	case m.Method != "":
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	}
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
	}
	switch {
	case id == initID:
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("gemini refused initialize: %s", m.Error.text())
		}
		return driver.Step{Write: [][]byte{rpcCall(openID, "session/new", map[string]any{"cwd": p.workdir, "mcpServers": []any{}})}}, nil
	case id == openID:
		if m.Error != nil {
			msg := m.Error.text()
			return driver.Step{}, &invoker.StreamError{Message: "gemini could not open a session: " + msg, Type: "session/new", Err: classify(msg)}
		}
		var r struct {
			SessionID string `json:"sessionId"`
			Models    *struct {
				CurrentModelID string `json:"currentModelId"`
			} `json:"models"`
		}
		json.Unmarshal(m.Result, &r)
		p.session = r.SessionID
		if r.Models != nil {
			p.models = true
			if p.model == "" {
				p.model = r.Models.CurrentModelID
			}
		}
		ev := invoker.Event{Kind: invoker.KindSession, SessionID: p.session, Raw: raw}
		if mode := acpModes[p.perm]; mode != "" {
			return driver.Step{Events: []invoker.Event{ev}, Write: [][]byte{rpcCall(modeID, "session/set_mode", map[string]string{"sessionId": p.session, "modeId": mode})}}, nil
		}
		return driver.Step{Events: []invoker.Event{ev}, Ready: true}, nil
	case id == modeID:
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("gemini refused the mode %q for permission %s: %s", acpModes[p.perm], p.perm, m.Error.text())
		}
		return driver.Step{Ready: true}, nil
	case p.inTurn && id == p.promptID:
		return p.finish(&m, raw), nil
	}
	if c, ok := p.switches[id]; ok {
		return p.switched(id, c, &m, raw), nil
	}
	return p.turnStep(invoker.Event{Kind: invoker.KindRaw, Raw: raw}), nil
}

// switched handles Gemini's answer to the switch c (request id): the
// switch takes effect, and once every switch of the turn has, the turn's
// prompt goes. A refused switch ends the turn with its error, before
// anything ran.
func (p *acp) switched(id int64, c change, m *acpMessage, raw json.RawMessage) driver.Step {
	delete(p.switches, id)
	what := "the model " + c.model
	if c.method == "session/set_mode" {
		what = fmt.Sprintf("the mode %q (permission %s)", acpMode(c.perm), c.perm)
	}
	if m.Error == nil {
		if c.method == "session/set_mode" {
			p.perm = c.perm
		} else {
			p.model = c.model
		}
	}
	if !p.inTurn || p.prompt == nil {
		return driver.Step{} // the turn already ended
	}
	if m.Error != nil {
		msg := "gemini refused to switch to " + what + ": " + m.Error.text()
		p.prompt, p.inTurn = nil, false
		p.failure = &invoker.StreamError{Message: msg, Type: c.method}
		return driver.Step{Events: p.announce([]invoker.Event{{Kind: invoker.KindError, Text: msg, Raw: raw}, {Kind: invoker.KindDone, Raw: raw}}), TurnEnded: true}
	}
	if len(p.switches) > 0 {
		return driver.Step{}
	}
	if p.cancelled {
		p.prompt, p.inTurn = nil, false
		p.failure = &invoker.StreamError{Message: "the turn was cancelled", Type: "cancelled"}
		return driver.Step{Events: p.announce([]invoker.Event{{Kind: invoker.KindDone, Raw: raw}}), TurnEnded: true}
	}
	prompt := p.prompt
	p.prompt = nil
	return driver.Step{Write: [][]byte{prompt}}
}

// turnStep returns ev as a step of the turn in flight, or nothing between
// turns. The agent message or thought being streamed ends before it.
func (p *acp) turnStep(ev invoker.Event) driver.Step {
	if !p.inTurn {
		return driver.Step{}
	}
	return driver.Step{Events: p.announce(append(p.endChunks(ev.Raw), ev))}
}

// endChunks returns the agent message and thought being streamed, each as
// one whole event carrying raw, the line that ended them, and starts anew.
func (p *acp) endChunks(raw []byte) []invoker.Event {
	var evs []invoker.Event
	if p.thought.Len() > 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindReasoning, Text: p.thought.String(), Raw: raw})
		p.thought.Reset()
	}
	if p.msg.Len() > 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindMessage, Text: p.msg.String(), Raw: raw})
		p.msg.Reset()
	}
	return evs
}

// announce puts the session event first in a turn, as init is a run's.
func (p *acp) announce(evs []invoker.Event) []invoker.Event {
	if p.announced {
		return evs
	}
	p.announced = true
	return append([]invoker.Event{{Kind: invoker.KindSession, SessionID: p.session}}, evs...)
}

// update maps one session/update notification.
func (p *acp) update(params json.RawMessage, raw json.RawMessage) []invoker.Event {
	var u struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       json.RawMessage
			ToolCallID    string          `json:"toolCallId"`
			Status        string          `json:"status"`
			Title         string          `json:"title"`
			Kind          string          `json:"kind"`
			RawInput      json.RawMessage `json:"rawInput"`
		} `json:"update"`
	}
	json.Unmarshal(params, &u)
	up := u.Update
	switch up.SessionUpdate {
	case "agent_message_chunk":
		text := chunkText(up.Content)
		if text == "" || (p.modeNote != "" && text == p.modeNote) {
			return nil
		}
		// A thought ends where the message starts.
		evs := p.endThought(raw)
		if p.afterTool && p.text.Len() > 0 {
			p.text.WriteString("\n\n") // as Invoke keeps messages a tool call separates apart
		}
		p.afterTool = false
		p.text.WriteString(text)
		p.msg.WriteString(text)
		return append(evs, invoker.Event{Kind: invoker.KindDelta, Delta: invoker.KindMessage, Text: text, Raw: raw})
	case "agent_thought_chunk":
		text := chunkText(up.Content)
		if text == "" {
			return nil
		}
		evs := p.endMessage(raw)
		p.thought.WriteString(text)
		return append(evs, invoker.Event{Kind: invoker.KindDelta, Delta: invoker.KindReasoning, Text: text, Raw: raw})
	}
	evs := p.endChunks(raw)
	switch up.SessionUpdate {
	case "tool_call", "tool_call_update":
		n := len(evs)
		c, seen := p.calls[up.ToolCallID]
		if !seen {
			p.afterTool = true
			input := driver.ValidJSON(up.RawInput)
			if input == nil && up.Title != "" {
				input, _ = json.Marshal(map[string]string{"title": up.Title})
			}
			c = call{name: toolName(up.ToolCallID, up.Kind), input: input}
			p.calls[up.ToolCallID] = c
			evs = append(evs, invoker.Event{Kind: invoker.KindToolCall, Raw: raw,
				Tool: &invoker.Tool{Name: c.name, ID: up.ToolCallID, Input: c.input, Status: up.Status}})
		}
		if up.Status == "completed" || up.Status == "failed" {
			evs = append(evs, invoker.Event{Kind: invoker.KindToolResult, Raw: raw, Tool: &invoker.Tool{
				Name: c.name, ID: up.ToolCallID, Input: c.input, Output: toolContent(up.Content), Status: up.Status,
			}})
		}
		if len(evs) > n {
			return evs
		}
	}
	return append(evs, invoker.Event{Kind: invoker.KindRaw, Raw: raw})
}

// endMessage returns the agent message being streamed as one whole event.
func (p *acp) endMessage(raw []byte) []invoker.Event {
	if p.msg.Len() == 0 {
		return nil
	}
	defer p.msg.Reset()
	return []invoker.Event{{Kind: invoker.KindMessage, Text: p.msg.String(), Raw: raw}}
}

// endThought returns the thought being streamed as one whole event.
func (p *acp) endThought(raw []byte) []invoker.Event {
	if p.thought.Len() == 0 {
		return nil
	}
	defer p.thought.Reset()
	return []invoker.Event{{Kind: invoker.KindReasoning, Text: p.thought.String(), Raw: raw}}
}

// toolName recovers Gemini's tool name from its call id
// ("run_shell_command__run_shell_command_1795567170161_0"), else the ACP
// kind ("execute").
func toolName(id, kind string) string {
	if name, _, ok := strings.Cut(id, "__"); ok && name != "" {
		return name
	}
	return kind
}

func chunkText(raw json.RawMessage) string {
	var c struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &c)
	return c.Text
}

// toolContent joins the text of a tool call's content blocks.
func toolContent(raw json.RawMessage) string {
	var blocks []struct {
		Type    string `json:"type"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Content.Text != "" {
			parts = append(parts, b.Content.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// finish handles the response to session/prompt: the end of the turn.
func (p *acp) finish(m *acpMessage, raw json.RawMessage) driver.Step {
	p.inTurn, p.modeNote = false, ""
	evs := p.endChunks(raw)
	if m.Error != nil {
		msg := m.Error.text()
		sentinel := classify(msg)
		if m.Error.Code == 429 {
			// Gemini answers a turn that its retries did not get past a
			// rate limit with the HTTP status as the error code.
			sentinel = invoker.ErrRateLimited
		}
		if sentinel == invoker.ErrRateLimited {
			p.resetsAt = resetTime(msg, p.now())
			if p.resetsAt.IsZero() {
				p.resetsAt = p.retries.resetsAt
			}
		}
		p.failure = &invoker.StreamError{Message: msg, Type: "session/prompt", Err: sentinel}
		evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: msg, Raw: raw})
	} else {
		var r struct {
			StopReason string `json:"stopReason"`
			Meta       struct {
				Quota struct {
					TokenCount struct {
						InputTokens  int64 `json:"input_tokens"`
						OutputTokens int64 `json:"output_tokens"`
					} `json:"token_count"`
				} `json:"quota"`
			} `json:"_meta"`
		}
		json.Unmarshal(m.Result, &r)
		switch r.StopReason {
		case "end_turn":
			p.success = true
		case "cancelled":
			p.failure = &invoker.StreamError{Message: "the turn was cancelled", Type: "cancelled"}
		default:
			p.failure = &invoker.StreamError{Message: "the turn stopped: " + r.StopReason, Type: r.StopReason}
			evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: p.failure.Message, Raw: raw})
		}
		tc := r.Meta.Quota.TokenCount
		p.usage = invoker.Usage{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens}
		u := p.usage
		evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw})
	}
	evs = append(evs, invoker.Event{Kind: invoker.KindDone, Raw: raw})
	return driver.Step{Events: p.announce(evs), TurnEnded: true}
}

// request answers a request of Gemini's: permissions as the session's
// Permission allows, anything else (the session offers no file system or
// terminal) refused.
func (p *acp) request(m *acpMessage, raw json.RawMessage) driver.Step {
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	var note string
	if m.Method == "session/request_permission" {
		var r struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
			ToolCall struct {
				Kind  string `json:"kind"`
				Title string `json:"title"`
			} `json:"toolCall"`
		}
		json.Unmarshal(m.Params, &r)
		want := "reject_once"
		if allowed(p.perm, r.ToolCall.Kind) {
			want = "allow_once"
		}
		outcome := map[string]string{"outcome": "cancelled"}
		for _, o := range r.Options {
			if o.Kind == want {
				outcome = map[string]string{"outcome": "selected", "optionId": o.OptionID}
				break
			}
		}
		reply["result"] = map[string]any{"outcome": outcome}
		if want == "reject_once" {
			note = fmt.Sprintf("gemini asked to run %s (%s); declined under permission %s", r.ToolCall.Title, r.ToolCall.Kind, p.perm)
		}
	} else {
		reply["error"] = map[string]any{"code": -32601, "message": "not supported by clinvoke: " + m.Method}
		note = "gemini asked " + m.Method + "; clinvoke does not offer it"
	}
	b, _ := json.Marshal(reply)
	st := driver.Step{Write: [][]byte{b}}
	if note != "" {
		st.Events = p.turnStep(invoker.Event{Kind: invoker.KindWarning, Text: note, Raw: raw}).Events
	}
	return st
}

// allowed says whether a tool call of an ACP kind may run under perm.
func allowed(perm invoker.Permission, kind string) bool {
	switch kind {
	case "read", "search", "fetch", "think":
		return true
	case "edit", "delete", "move":
		return perm.Rank() >= 1
	}
	return perm == invoker.Unlimited
}

// Stderr stops the session at a login prompt, and notes the retries of
// model requests Gemini reports there (see retryLog).
func (p *acp) Stderr(b []byte) error {
	p.retries.stderr(b, p.now())
	return stallSignature(b)
}

func (p *acp) Outcome(string) driver.Outcome {
	out := driver.Outcome{SessionID: p.session, Text: p.text.String(), Usage: p.usage, Success: p.success, ResetsAt: p.resetsAt}
	if !p.success && p.failure != nil {
		se := *p.failure
		out.Err = &se
	}
	return out
}
