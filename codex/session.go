package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// Sessions (Invoker.OpenSession) run
//
//	codex app-server [ExtraArgs...]
//
// which speaks JSON-RPC 2.0, one message per line, on standard input and
// output ([experimental] at 0.169.0; measured in
// docs/session-protocols.md). The session sends initialize (asking for the
// experimental API), initialized, then thread/start, or thread/resume when
// Request.SessionID is set, with the workdir, the model, the sandbox of
// Request.Permission (as for Invoke), developerInstructions from
// SystemPrompt and the approval policy "never": Codex asks no questions,
// and any request it sends all the same is declined, so that no turn waits
// on an answer. ExtraArgs go to app-server itself, which takes only
// configuration overrides (-c key=value, --enable, --disable).
//
// Each turn is a turn/start with the prompt (and Images as local images);
// its events are the item notifications (agent message deltas and whole
// messages, reasoning, command executions, file changes, MCP tool calls,
// web searches), and turn/completed ends it with status completed,
// interrupted or failed. A cancelled turn is stopped with turn/interrupt.
// Codex keeps a tool's process running after an interrupt (a "background
// terminal" of the thread), so after every turn the session asks for
// thread/backgroundTerminals/clean and ends the turn when Codex has
// answered: when Turn returns, the turn's tools are gone. The partial
// answer of an interrupted turn is not kept in the thread, but the turn
// gives it: a message cut by the end of its turn comes whole, as far as it
// was written, before the turn's done event. Usage is the thread's total,
// as with Invoke.
//
// A session with Fork opens with thread/fork instead of thread/resume. A
// turn's Model and Permission are turn/start's overrides, Steer is
// turn/steer, and rate-limit snapshots and retries become events (see
// the package documentation, Live turns).

var (
	_ driver.SessionBackend = backend{}
	_ driver.Steerer        = backend{}
)

// Steer steers the turn in progress of p (see protocol.Steer).
func (backend) Steer(p driver.SessionProtocol, prompt string) ([][]byte, error) {
	return p.(*protocol).Steer(prompt)
}

// SessionCommand starts the app-server; everything else of the request
// goes in the protocol.
func (backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	mode, err := sandboxMode(req.Permission, req.Sandbox)
	if err != nil {
		return nil, err
	}
	args := []string{"app-server"}
	if req.Approve != nil {
		args = append(args, profileArgs(mode)...)
	}
	// The servers go in the thread's opening (NewSessionProtocol); they
	// are checked here, before anything starts.
	if _, err := mcpConfig(req.MCPServers, req.Approve == nil, sandboxed(req.Sandbox)); err != nil {
		return nil, err
	}
	return &driver.Command{Args: append(args, req.ExtraArgs...)}, nil
}

// NewSessionProtocol returns the JSON-RPC driver of one app-server session.
func (backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	mode, _ := sandboxMode(req.Permission, req.Sandbox)
	mcp, _ := mcpConfig(served(req.MCPServers), req.Approve == nil, sandboxed(req.Sandbox)) // checked by SessionCommand
	p := &protocol{
		workdir: req.Workdir, model: req.Model, mode: mode,
		instructions: req.SystemPrompt, resume: req.SessionID, fork: req.Fork, mcp: mcp,
		schema: req.OutputSchema, approve: req.Approve != nil,
		sandbox: req.Sandbox, opened: req.Permission, ceiling: req.Permission, ws: workspace.New(req.Workdir, req.Env), asking: make(map[string]*asked),
		next: 1, called: make(map[string]bool), steers: make(map[int64]bool),
		limits: make(map[string]rateWindow), trusted: make(map[string]bool),
		changes: make(map[string]fileChange), mcpCalls: make(map[string]string),
	}
	if p.ceiling == "" {
		p.ceiling = invoker.ReadOnly
	}
	for _, s := range req.MCPServers {
		p.trusted[s.Name] = true
	}
	return p
}

// served returns servers as SessionCommand had them: a Go server the
// engine serves keeps its Server here beside its URL (see
// driver.SessionBackend), and is a URL server to Codex.
func served(servers []invoker.MCPServer) []invoker.MCPServer {
	out := make([]invoker.MCPServer, len(servers))
	for i, s := range servers {
		if s.URL != "" {
			s.Server = nil
		}
		out[i] = s
	}
	return out
}

// Request ids of the session's own calls.
const (
	initID = 1
	openID = 2
)

type protocol struct {
	workdir, model, mode, instructions, resume string
	fork                                       bool            // open a fork of resume
	schema                                     json.RawMessage // every turn's outputSchema
	// approve: the program decides Codex's questions (see approval.go).
	approve bool
	// sandbox is the one the engine gives the session, which turns
	// Codex's own off at every level where the kernel holds it; opened is
	// the level the session was opened with, the kernel's ceiling.
	sandbox invoker.Sandbox
	opened  invoker.Permission
	// ceiling is the permission level in force, which bounds what the
	// program is asked; ws judges the paths of file changes under
	// WorkspaceWrite.
	ceiling invoker.Permission
	ws      *workspace.Root
	// asking holds the requests the program is deciding, by requestKey.
	asking map[string]*asked
	// trusted holds the names of the request's MCP servers.
	trusted map[string]bool
	// mcp holds the servers' entries of the opening's config map
	// (mcp.go), secrets included: they never go on app-server's command
	// line or into its environment.
	mcp map[string]any
	// editsGranted says that the program allowed a file change for the
	// session below Unlimited: kept here rather than given to Codex, so
	// that each later change is still judged (see approval.go).
	editsGranted bool
	// changes holds the file changes started and not completed, by item
	// id, for their approvals.
	changes map[string]fileChange
	// mcpCalls holds the item id of the MCP tool call in progress, by
	// server and tool, for its approval.
	mcpCalls map[string]string

	next   int64 // the last request id used
	thread string

	// The turn in flight.
	inTurn        bool
	turnReq       int64  // id of its turn/start
	turn          string // its id, once turn/start answered
	wantInterrupt bool   // interrupt as soon as the turn id is known
	cleanReq      int64  // id of the clean request that ends it
	ending        []invoker.Event
	text          string
	partial       strings.Builder
	usage         invoker.Usage
	ended         bool
	success       bool
	failure       *invoker.StreamError
	called        map[string]bool
	// steered holds the steering prompts given before turn/start was
	// answered: turn/steer needs the turn's id.
	steered []string
	// steers holds the ids of the turn/steer requests not answered yet.
	steers map[int64]bool
	// limits is the latest state of each rate-limit window Codex
	// reported, by limitId and window ("codex/primary").
	limits map[string]rateWindow
}

// rateWindow is one window of an account/rateLimits/updated snapshot.
type rateWindow struct {
	UsedPercent float64 `json:"usedPercent"`
	ResetsAt    *int64  `json:"resetsAt"`
}

// rpc is any JSON-RPC message: a request (id and method), a notification
// (method) or a response (id and result or error).
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// appItem is an app-server thread item (camelCase, unlike exec --json).
type appItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Status           string          `json:"status"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Content          json.RawMessage `json:"content"`
	Command          string          `json:"command"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           *mcpResult      `json:"result"`
	Error            *errorObj       `json:"error"`
	Query            string          `json:"query"`
	Action           json.RawMessage `json:"action"`
}

// execTypes names the app-server's tool items as exec --json does, so
// that a tool's name is the same in sessions and runs.
var execTypes = map[string]string{
	"commandExecution": "command_execution",
	"fileChange":       "file_change",
	"mcpToolCall":      "mcp_tool_call",
	"webSearch":        "web_search",
}

// execStatus spells the app-server's statuses as exec --json does.
var execStatus = map[string]string{"inProgress": "in_progress"}

func (it *appItem) exec() *item {
	out := &item{
		ID: it.ID, Type: execTypes[it.Type], Status: it.Status, Command: it.Command,
		ExitCode: it.ExitCode, Changes: it.Changes, Server: it.Server, Tool: it.Tool,
		Arguments: it.Arguments, Result: it.Result, Error: it.Error, Query: it.Query, Action: it.Action,
	}
	if s, ok := execStatus[it.Status]; ok {
		out.Status = s
	}
	if it.AggregatedOutput != nil {
		out.AggregatedOutput = *it.AggregatedOutput
	}
	return out
}

func (p *protocol) call(method string, params any) ([]byte, int64) {
	p.next++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.next, "method": method, "params": params})
	return b, p.next
}

func notification(method string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	return b
}

func (p *protocol) Open() ([][]byte, bool) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": initID, "method": "initialize", "params": map[string]any{
		"clientInfo": map[string]any{"name": "clinvoke", "title": nil, "version": "0"},
		// backgroundTerminals/clean is part of the experimental API.
		"capabilities": map[string]any{"experimentalApi": true},
	}})
	p.next = openID
	return [][]byte{b}, false
}

// opening returns the method that opens the session's thread and what it
// does, in the words of an error: a new thread, a fork or a resume of the
// thread the session names.
func (p *protocol) opening() (method, what string) {
	switch {
	case p.resume != "" && p.fork:
		return "thread/fork", "fork thread " + p.resume
	case p.resume != "":
		return "thread/resume", "resume thread " + p.resume
	}
	return "thread/start", "start a thread"
}

// open returns the call that opens the session's thread: thread/start,
// thread/resume or thread/fork (opening).
func (p *protocol) open() []byte {
	params := map[string]any{"cwd": p.workdir, "approvalPolicy": "never", "sandbox": p.mode}
	if p.approve {
		// The permission profile holds the sandbox (approval.go); it is
		// app-server's default, which thread/resume and thread/fork get.
		params["approvalPolicy"] = "untrusted"
		delete(params, "sandbox")
	}
	if p.model != "" {
		params["model"] = p.model
	}
	if p.instructions != "" {
		params["developerInstructions"] = p.instructions
	}
	if len(p.mcp) > 0 {
		// Codex does not keep a thread's servers with the thread: a
		// resume or a fork names them again.
		params["config"] = p.mcp
	}
	if p.approve && p.resume == "" {
		params["permissions"] = profileOf(p.mode)
	}
	method, _ := p.opening()
	switch method {
	case "thread/fork":
		// A fork is a new thread holding a copy of the old one's
		// history; the old thread is not touched.
		params["threadId"] = p.resume
		// The reply need not copy the history back (Codex deprecates
		// that for forks, 0.169.0).
		params["excludeTurns"] = true
	case "thread/resume":
		params["threadId"] = p.resume
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": openID, "method": method, "params": params})
	return b
}

func (p *protocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	input := []map[string]any{{"type": "text", "text": t.Prompt, "text_elements": []any{}}}
	for _, img := range t.Images {
		input = append(input, map[string]any{"type": "localImage", "path": img})
	}
	params := map[string]any{"threadId": p.thread, "input": input}
	// turn/start's overrides hold for this turn and the ones after it,
	// as TurnRequest's switches do.
	if t.Model != "" {
		params["model"] = t.Model
	}
	if t.Permission != "" {
		// The kernel's ceiling is the opening's level and cannot be
		// lowered: a turn below it runs under Codex's own sandbox for its
		// level, which cannot work inside the kernel's, so that its
		// commands and patches fail rather than run at the opening's level.
		sb := p.sandbox
		if t.Permission.Rank() < p.opened.Rank() {
			sb = invoker.Sandbox{}
		}
		mode, err := sandboxMode(t.Permission, sb)
		if err != nil {
			return nil, err
		}
		p.ceiling = t.Permission
		if p.approve {
			params["permissions"] = profileOf(mode)
			params["approvalPolicy"] = "untrusted"
		} else {
			params["sandboxPolicy"] = sandboxPolicy(mode)
			params["approvalPolicy"] = "never"
		}
	}
	if len(p.schema) > 0 {
		params["outputSchema"] = p.schema
	}
	p.inTurn, p.turn, p.wantInterrupt, p.cleanReq, p.ending = true, "", false, 0, nil
	p.text, p.usage, p.ended, p.success, p.failure = "", invoker.Usage{}, false, false, nil
	p.partial.Reset()
	clear(p.called)
	// What an interrupted turn's items left behind (they never completed)
	// is not the new turn's.
	clear(p.changes)
	clear(p.mcpCalls)
	p.steered = nil
	b, id := p.call("turn/start", params)
	p.turnReq = id
	return [][]byte{b}, nil
}

// sandboxPolicy spells a sandbox mode as turn/start's sandboxPolicy, the
// way Codex reports the policy a thread/start with that mode gets
// (measured with 0.169.0): the same access as the session's opening.
func sandboxPolicy(mode string) map[string]any {
	switch mode {
	case "workspace-write":
		return map[string]any{"type": "workspaceWrite", "writableRoots": []string{}, "networkAccess": false,
			"excludeTmpdirEnvVar": false, "excludeSlashTmp": false}
	case "danger-full-access":
		return map[string]any{"type": "dangerFullAccess"}
	}
	return map[string]any{"type": "readOnly", "networkAccess": false}
}

// Steer is backend.Steer's: it sends turn/steer, which adds prompt to
// the running turn: Codex gives it to the model with the turn's next
// request. A steer given before Codex answered turn/start waits for the
// turn's id, which turn/steer must name.
func (p *protocol) Steer(prompt string) ([][]byte, error) {
	if !p.inTurn || p.ended {
		return nil, fmt.Errorf("%w: the turn is ending; send the message with Session.Turn", invoker.ErrInvalidRequest)
	}
	if p.turn == "" {
		p.steered = append(p.steered, prompt)
		return nil, nil
	}
	return [][]byte{p.steerLine(prompt)}, nil
}

func (p *protocol) steerLine(prompt string) []byte {
	b, id := p.call("turn/steer", map[string]any{"threadId": p.thread, "expectedTurnId": p.turn,
		"input": []map[string]any{{"type": "text", "text": prompt, "text_elements": []any{}}}})
	p.steers[id] = true
	return b
}

func (p *protocol) interruptLine() []byte {
	b, _ := p.call("turn/interrupt", map[string]any{"threadId": p.thread, "turnId": p.turn})
	return b
}

func (p *protocol) Interrupt() [][]byte {
	if !p.inTurn || p.ended {
		return nil
	}
	if p.turn == "" {
		p.wantInterrupt = true // sent when turn/start answers
		return nil
	}
	return [][]byte{p.interruptLine()}
}

func (p *protocol) Decode(line []byte) (driver.Step, error) {
	raw := json.RawMessage(line)
	var m rpc
	if err := json.Unmarshal(line, &m); err != nil {
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindWarning, Text: "codex app-server printed a line that is not JSON: " + err.Error()}}}, nil
	}
	rawEv := []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return p.serverRequest(&m, raw), nil
	case m.Method != "":
		return p.notification(&m, raw), nil
	}
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		return driver.Step{Events: rawEv}, nil
	}
	if p.steers[id] {
		delete(p.steers, id)
		if m.Error != nil {
			return driver.Step{Events: []invoker.Event{{Kind: invoker.KindWarning, Raw: raw,
				Text: "codex did not take the steering message: " + m.Error.Message}}}, nil
		}
		return driver.Step{Events: rawEv}, nil
	}
	switch {
	case id == initID:
		if m.Error != nil {
			return driver.Step{}, fmt.Errorf("codex app-server refused initialize: %s", m.Error.Message)
		}
		return driver.Step{Write: [][]byte{notification("initialized"), p.open()}}, nil
	case id == openID:
		if m.Error != nil {
			method, what := p.opening()
			return driver.Step{}, &invoker.StreamError{Message: fmt.Sprintf("codex app-server could not %s: %s", what, m.Error.Message), Type: method, Err: classify(m.Error.Message)}
		}
		var r struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		json.Unmarshal(m.Result, &r)
		p.thread = r.Thread.ID
		return driver.Step{Ready: true, Events: []invoker.Event{{Kind: invoker.KindSession, SessionID: p.thread, Raw: raw}}}, nil
	case p.inTurn && id == p.turnReq:
		if m.Error != nil {
			p.failure = &invoker.StreamError{Message: m.Error.Message, Type: "turn/start", Err: classify(m.Error.Message)}
			p.ended = true
			return driver.Step{Events: []invoker.Event{{Kind: invoker.KindError, Text: m.Error.Message, Raw: raw}, {Kind: invoker.KindDone, Raw: raw}}, TurnEnded: true}, nil
		}
		var r struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		json.Unmarshal(m.Result, &r)
		if p.turn == "" {
			p.turn = r.Turn.ID
		}
		// The turn's first event, as thread.started is a run's.
		st := driver.Step{Events: []invoker.Event{{Kind: invoker.KindSession, SessionID: p.thread, Raw: raw}}}
		if !p.ended {
			for _, prompt := range p.steered {
				st.Write = append(st.Write, p.steerLine(prompt))
			}
		}
		p.steered = nil
		if p.wantInterrupt && !p.ended {
			p.wantInterrupt = false
			st.Write = append(st.Write, p.interruptLine())
		}
		return st, nil
	case p.inTurn && id == p.cleanReq && p.cleanReq != 0:
		evs := p.ending
		if m.Error != nil {
			evs = append([]invoker.Event{{Kind: invoker.KindWarning, Raw: raw,
				Text: "codex did not clean the thread's background terminals: " + m.Error.Message}}, evs...)
		}
		p.inTurn, p.cleanReq, p.ending = false, 0, nil
		return driver.Step{Events: evs, TurnEnded: true}, nil
	case m.Error != nil:
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindWarning, Raw: raw, Text: "codex app-server: " + m.Error.Message}}}, nil
	}
	return driver.Step{Events: rawEv}, nil
}

func (p *protocol) notification(m *rpc, raw json.RawMessage) driver.Step {
	one := func(ev invoker.Event) driver.Step {
		ev.Raw = raw
		return driver.Step{Events: []invoker.Event{ev}}
	}
	var params struct {
		ThreadID   string          `json:"threadId"`
		Delta      string          `json:"delta"`
		Item       *appItem        `json:"item"`
		Turn       json.RawMessage `json:"turn"`
		Error      *turnError      `json:"error"`
		WillRetry  bool            `json:"willRetry"`
		RateLimits *struct {
			LimitID   string      `json:"limitId"`
			Primary   *rateWindow `json:"primary"`
			Secondary *rateWindow `json:"secondary"`
		} `json:"rateLimits"`
		TokenUsage *struct {
			Total struct {
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
				ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
			} `json:"total"`
		} `json:"tokenUsage"`
	}
	json.Unmarshal(m.Params, &params)
	if params.ThreadID != "" && p.thread != "" && params.ThreadID != p.thread {
		return one(invoker.Event{Kind: invoker.KindRaw}) // a sub-agent's thread
	}
	if !p.inTurn || p.turn == "" {
		// Between turns (thread/started after the handshake, status
		// changes): nothing of a turn, and printed before turn/start
		// was answered, so not to be mistaken for the next turn's.
		return driver.Step{}
	}
	switch m.Method {
	case "item/agentMessage/delta":
		p.partial.WriteString(params.Delta)
		return one(invoker.Event{Kind: invoker.KindDelta, Text: params.Delta, Delta: invoker.KindMessage})
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		return one(invoker.Event{Kind: invoker.KindDelta, Text: params.Delta, Delta: invoker.KindReasoning})
	case "item/started", "item/completed":
		if params.Item == nil {
			break
		}
		p.track(params.Item, m.Method == "item/completed")
		return driver.Step{Events: p.item(m.Method == "item/completed", params.Item, raw)}
	case "thread/tokenUsage/updated":
		if params.TokenUsage != nil {
			t := params.TokenUsage.Total
			p.usage = invoker.Usage{InputTokens: t.InputTokens, CachedInputTokens: t.CachedInputTokens,
				OutputTokens: t.OutputTokens, ReasoningTokens: t.ReasoningOutputTokens}
		}
	case "error":
		if params.Error != nil {
			ev := invoker.Event{Kind: invoker.KindWarning, Text: params.Error.Message}
			if params.WillRetry {
				ev.Retry = params.Error.retry()
				if d := params.Error.AdditionalDetails; d != "" {
					ev.Text += " (" + d + ")"
				}
			}
			return one(ev)
		}
	case "account/rateLimits/updated":
		if rl := params.RateLimits; rl != nil {
			var evs []invoker.Event
			for _, w := range []struct {
				name string
				w    *rateWindow
			}{{"primary", rl.Primary}, {"secondary", rl.Secondary}} {
				if w.w == nil {
					continue
				}
				name := w.name
				if rl.LimitID != "" && rl.LimitID != "codex" {
					name = rl.LimitID + "." + name
				}
				p.limits[name] = *w.w
				evs = append(evs, invoker.Event{Kind: invoker.KindRateLimit, Raw: raw,
					RateLimit: &invoker.RateLimit{Limit: name, UsedPercent: w.w.UsedPercent, ResetsAt: unixTime(w.w.ResetsAt)}})
			}
			if len(evs) > 0 {
				return driver.Step{Events: evs}
			}
		}
	case "turn/completed":
		return p.completed(params.Turn, raw)
	}
	return one(invoker.Event{Kind: invoker.KindRaw})
}

// item maps an item notification as the exec decoder maps its items.
func (p *protocol) item(completed bool, it *appItem, raw json.RawMessage) []invoker.Event {
	ev := func(k invoker.EventKind, text string) []invoker.Event {
		return []invoker.Event{{Kind: k, Text: text, Raw: raw}}
	}
	switch it.Type {
	case "agentMessage":
		if !completed {
			break
		}
		p.text = it.Text
		p.partial.Reset()
		return ev(invoker.KindMessage, it.Text)
	case "reasoning":
		if !completed {
			break
		}
		return ev(invoker.KindReasoning, strings.Join(it.Summary, "\n"))
	}
	if execTypes[it.Type] == "" {
		return ev(invoker.KindRaw, "")
	}
	tool, _ := toolOf(it.exec())
	if !completed {
		p.called[it.ID] = true
		tool.Output = ""
		return []invoker.Event{{Kind: invoker.KindToolCall, Tool: tool, Raw: raw}}
	}
	var evs []invoker.Event
	if !p.called[it.ID] {
		call := *tool
		call.Output = ""
		evs = append(evs, invoker.Event{Kind: invoker.KindToolCall, Tool: &call, Raw: raw})
	}
	delete(p.called, it.ID)
	return append(evs, invoker.Event{Kind: invoker.KindToolResult, Tool: tool, Raw: raw})
}

// completed handles turn/completed: the turn's outcome is known, and its
// end waits for the cleaning of the thread's background terminals.
func (p *protocol) completed(rawTurn json.RawMessage, raw json.RawMessage) driver.Step {
	var t struct {
		ID     string     `json:"id"`
		Status string     `json:"status"`
		Error  *turnError `json:"error"`
	}
	json.Unmarshal(rawTurn, &t)
	if !p.inTurn || p.ended || (p.turn != "" && t.ID != p.turn) {
		return driver.Step{Events: []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}}
	}
	p.ended = true
	var evs []invoker.Event
	if p.partial.Len() > 0 {
		// The turn ended while a message was being written (an
		// interrupt, a failure): the message as far as it came, whole,
		// as an ACP turn's is, so that a consumer of whole messages
		// sees the text Result.Text holds.
		evs = append(evs, invoker.Event{Kind: invoker.KindMessage, Text: p.partial.String(), Raw: raw})
	}
	switch t.Status {
	case "completed":
		p.success = true
	case "interrupted":
		p.failure = &invoker.StreamError{Message: "the turn was interrupted", Type: "interrupted"}
	default:
		msg := "the turn failed"
		if t.Error != nil && t.Error.Message != "" {
			msg = t.Error.Message
		}
		cause := classify(msg)
		if t.Error != nil && t.Error.rateLimited() {
			cause = invoker.ErrRateLimited
		}
		p.failure = &invoker.StreamError{Message: msg, Type: "turn.failed", Err: cause}
		evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: msg, Raw: raw})
	}
	u := p.usage
	evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw}, invoker.Event{Kind: invoker.KindDone, Raw: raw})
	p.ending = evs
	b, id := p.call("thread/backgroundTerminals/clean", map[string]any{"threadId": p.thread})
	p.cleanReq = id
	return driver.Step{Write: [][]byte{b}, Events: []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}}
}

func (p *protocol) Stderr([]byte) error { return nil }

func (p *protocol) Outcome(string) driver.Outcome {
	out := driver.Outcome{SessionID: p.thread, Text: p.text, Usage: p.usage, Success: p.success}
	if !p.success {
		if p.partial.Len() > 0 {
			out.Text = p.partial.String()
		}
		if p.failure != nil {
			se := *p.failure
			out.Err = &se
			if se.Err == invoker.ErrRateLimited {
				out.ResetsAt = p.resetsAt(time.Now())
			}
		}
	}
	return out
}

// resetsAt says when the rate limits that are used up lift, from the
// latest snapshot of each window: the latest reset among the windows at
// 100% that reset after now. It is zero when no window is used up (a
// short-term limit, of which Codex reports no reset).
func (p *protocol) resetsAt(now time.Time) time.Time {
	var at time.Time
	for _, w := range p.limits {
		if w.UsedPercent < 100 {
			continue
		}
		if r := unixTime(w.ResetsAt); r.After(now) && r.After(at) {
			at = r
		}
	}
	return at
}

func unixTime(sec *int64) time.Time {
	if sec == nil || *sec <= 0 {
		return time.Time{}
	}
	return time.Unix(*sec, 0)
}

// turnError is the error of a failed turn, and of an error notification
// (TurnError in the app-server protocol).
type turnError struct {
	Message string `json:"message"`
	// CodexErrorInfo is a name ("usageLimitExceeded") or an object whose
	// one key names the error and may hold the HTTP status
	// ({"responseStreamDisconnected":{"httpStatusCode":429}}).
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails string          `json:"additionalDetails"`
}

// info returns the error's name and HTTP status, as far as Codex gave
// them.
func (e *turnError) info() (name string, status int) {
	if json.Unmarshal(e.CodexErrorInfo, &name) == nil {
		return name, 0
	}
	var obj map[string]struct {
		HTTPStatusCode int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &obj) != nil {
		return "", 0
	}
	for k, v := range obj {
		return k, v.HTTPStatusCode
	}
	return "", 0
}

// rateLimited reports whether Codex says a rate or usage limit failed the
// turn, by name or by the HTTP status of the last attempt.
func (e *turnError) rateLimited() bool {
	name, status := e.info()
	return name == "usageLimitExceeded" || name == "rateLimitExceeded" || status == 429
}

// reconnectRE matches Codex's retry notice, "Reconnecting... 1/5", in
// both modes.
var reconnectRE = regexp.MustCompile(`^Reconnecting\.\.\. (\d+)/(\d+)`)

// retryOf reads the attempt and the number of retries from a retry
// notice, or returns nil for another message.
func retryOf(msg string) *invoker.Retry {
	m := reconnectRE.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	n, _ := strconv.Atoi(m[1])
	max, _ := strconv.Atoi(m[2])
	return &invoker.Retry{Attempt: n, MaxAttempts: max}
}

// retry describes the retry an error notification with willRetry
// announces.
func (e *turnError) retry() *invoker.Retry {
	r := retryOf(e.Message)
	if r == nil {
		r = &invoker.Retry{}
	}
	_, r.HTTPStatus = e.info()
	return r
}
