package claude

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// Sessions (Invoker.OpenSession) run
//
//	claude --print --output-format=stream-json --verbose --input-format=stream-json --replay-user-messages [the flags of Command]
//
// with standard input kept open. Each turn is one user message written as a
// JSON line; Claude Code answers it with the events of a turn (system init
// first, once per message), ending with exactly one result line, and waits
// for the next message. A cancelled turn is stopped with the control
// request the Claude Agent SDK sends,
//
//	{"type":"control_request","request_id":ID,"request":{"subtype":"interrupt"}}
//
// after which Claude Code prints the partial answer, a user line "[Request
// interrupted by user]", kills the turn's tools and ends the turn with a
// result of subtype error_during_execution; the conversation keeps the
// interrupted turn. End of input ends the process (measured with 2.1.197,
// docs/session-protocols.md).
//
// A turn's TurnRequest.Model and TurnRequest.Permission are switched with
// the control requests the Claude Agent SDK sends, before the prompt and
// only when they change:
//
//	{"type":"control_request","request_id":ID,"request":{"subtype":"set_model","model":M}}
//	{"type":"control_request","request_id":ID,"request":{"mode":MODE,"subtype":"set_permission_mode"}}
//
// with MODE mapped from the permission as on the command line. A session
// opened above ReadOnly and switched down to it runs in mode "default"
// with the flags it was started with: Edit and Write are refused (print
// mode approves nothing), but they are not disallowed outright and the
// allow rules of the settings the session loaded still apply, as they do
// not for a read-only Invoke. A session opened read-only cannot rise above
// it (the engine's ceiling).
//
// Session.Steer writes a user message while the turn runs (see
// protocol.Steer for what Claude Code does with it); --replay-user-messages
// makes Claude Code echo each user message it takes, which is how the
// session knows which result answers everything it was sent. Those echoes,
// and the switches' answers, are KindRaw events.

var (
	_ driver.SessionBackend = backend{}
	_ driver.InBandMCP      = backend{}
	_ driver.Steerer        = backend{}
)

// InBand: Claude Code reaches every Go MCP server over its own protocol,
// as one of its SDK MCP servers.
func (backend) InBand(*invoker.SessionRequest) bool { return true }

// Steer steers the turn in progress of p (see protocol.Steer).
func (backend) Steer(p driver.SessionProtocol, prompt string) ([][]byte, error) {
	return p.(*protocol).Steer(prompt)
}

// SessionCommand is Command with stream-json input and no prompt, and the
// flags of two-way control: with an Approve callback, the permission mode
// "default" and --permission-prompt-tool=stdio (see approval.go); with
// MCPServers, --mcp-config and, without a callback, --allowedTools for
// their tools (see mcp.go). They come before ExtraArgs, which win.
func (b backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	full := req.Request(invoker.TurnRequest{})
	cmd, err := command(&full, req.Approve != nil)
	if err != nil {
		return nil, err
	}
	var twoWay []string
	if len(req.MCPServers) > 0 {
		mcp, cleanup, err := mcpArgs(req)
		if err != nil {
			return nil, err
		}
		withCleanup(cmd, cleanup)
		twoWay = append(twoWay, mcp...)
	}
	if req.Approve != nil {
		twoWay = append(twoWay, "--permission-prompt-tool=stdio")
	}
	// After the output flags, before the permission flags and ExtraArgs.
	// The replayed user messages say when Claude Code took a steer (see
	// protocol.Steer).
	own := len(cmd.Args) - len(req.ExtraArgs)
	args := make([]string, 0, len(cmd.Args)+2+len(twoWay))
	args = append(args, cmd.Args[:3]...)
	args = append(args, "--input-format=stream-json", "--replay-user-messages")
	args = append(args, cmd.Args[3:own]...)
	args = append(args, twoWay...)
	cmd.Args = append(args, cmd.Args[own:]...)
	cmd.Stdin = ""
	return cmd, nil
}

// NewSessionProtocol returns the driver of one stream-json session.
func (backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	mode, _ := permissionMode(req.Permission)
	p := &protocol{dec: newDecoder(), model: req.Model, mode: mode, steers: map[string]bool{}, newID: newUUID,
		asking: req.Approve != nil, ceiling: req.Permission, ws: workspace.New(req.Workdir, req.Env),
		servers: map[string]bool{}, goServers: map[string]bool{},
		waiting: map[string]*waitingUse{}, forSession: map[string]bool{}, switches: map[string]pendingSwitch{}}
	if p.ceiling == "" {
		p.ceiling = invoker.ReadOnly
	}
	if p.asking {
		p.mode = "default"
	}
	p.names = mcphost.NewNames(req.MCPServers)
	for _, s := range req.MCPServers {
		p.servers[s.Name] = true
		if s.Server != nil {
			p.goServers[s.Name] = true
		}
	}
	return p
}

// protocol drives one session: a decoder per turn, the control requests it
// sent, the model and permission mode in force, and the steers of the turn
// in progress.
type protocol struct {
	dec      *decoder // the current (or last) turn's
	requests int      // control requests sent

	model string // "" for Claude Code's default
	mode  string // the permission mode
	// switches holds the switches sent and not answered yet, by request
	// id: a switch is in force once Claude Code took it, so that one it
	// refused is asked again by the next turn that wants it.
	switches map[string]pendingSwitch

	// steers holds the uuids of the turn's steering messages that Claude
	// Code has not taken yet (not replayed). A result while one is
	// pending is not the end of the turn: the message starts a turn of the
	// CLI's own, whose result answers it.
	steers map[string]bool
	// between: such a result came, and the CLI's turn that takes the
	// steers has not started (no system init since).
	between bool
	// interrupted: the turn was interrupted. A result of an interrupted
	// turn with steers pending, or an interrupt between such a result and
	// the next system init (which the CLI takes between its turns, where
	// it stops nothing), is followed by a turn of the CLI's that takes the
	// steers (queued messages are joined); owed says that turn is still to
	// come or running: it is interrupted as it starts, and whatever its
	// result, the turn it ends did not succeed.
	interrupted, owed bool
	cut               bool // the owed turn was interrupted
	// ended: the turn's last result came (Step.TurnEnded); a steer now
	// would start a turn of the CLI's own, after ours.
	ended bool
	// newID returns the uuid of a steering message (newUUID; a test sets
	// its own).
	newID func() string

	// lowering is the request id of the turn's switch to a lower
	// permission mode, not answered yet; held is the turn's prompt, which
	// waits for that answer. refused is Claude Code's reason for refusing
	// it: the turn ended without running.
	lowering string
	held     []byte
	refused  string

	// asking: the session has an Approve callback; ceiling is the
	// permission level in force, which bounds what it is asked.
	asking  bool
	ceiling invoker.Permission
	// ws judges the paths of the edits WorkspaceWrite allows.
	ws *workspace.Root
	// servers are the names of the request's MCP servers, and goServers
	// those of its Go servers, which mcp_message requests reach.
	servers, goServers map[string]bool
	// names reads the names of MCP tools, knowing the tools of the Go
	// servers.
	names *mcphost.Names
	// waiting holds the can_use_tool requests given to the callback and
	// not answered or withdrawn yet, by request id; forSession the tools allowed for the rest of the session
	// (Decision.ForSession).
	waiting    map[string]*waitingUse
	forSession map[string]bool
}

// pendingSwitch is a set_model or set_permission_mode sent: what it
// switches to, and what makes it the one in force.
type pendingSwitch struct {
	what string // "the model to M", for a refusal's warning
	take func()
}

// userMessage is the line that carries one turn's prompt.
type userMessage struct {
	Type    string `json:"type"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	SessionID       string  `json:"session_id"`
	// UUID marks a steering message, so that its replay can be told.
	UUID string `json:"uuid,omitempty"`
}

// controlLine is a control_request or control_response, either way, or a
// control_cancel_request.
type controlLine struct {
	Type      string          `json:"type"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  *struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	} `json:"response"`
}

// initID is the request id of the session's initialize request.
const initID = "clinvoke-init"

// Open sends the initialize control request the Claude Agent SDK sends
// first: Claude Code prints nothing else before the first user message,
// and its answer says the CLI is up and reading its input (measured with
// 2.1.197: a control_response of subtype success carrying its commands).
// The session is ready then, so its start-up is paid by OpenSession, not by
// the first turn, and what the CLI started by then is its own, spared by a
// cancelled turn's sweep.
//
// The request names the Go servers (sdkMcpServers), as the Agent SDKs'
// does beside their "sdk" entries of --mcp-config: without it, Claude
// Code 2.1.197 at times took the first prompt before it had listed those
// servers' tools, and the model's call of one failed ("No such tool
// available").
func (p *protocol) Open() ([][]byte, bool) {
	req := map[string]any{"subtype": "initialize", "hooks": nil}
	if len(p.goServers) > 0 {
		names := make([]string, 0, len(p.goServers))
		for name := range p.goServers {
			names = append(names, name)
		}
		slices.Sort(names)
		req["sdkMcpServers"] = names
	}
	b, _ := json.Marshal(map[string]any{
		"type":       "control_request",
		"request_id": initID,
		"request":    req,
	})
	return [][]byte{b}, false
}

// StartTurn sends the turn's switches, then its prompt. A model or
// permission that differs from the one in force is switched with the
// control request the Claude Agent SDK sends (set_model,
// set_permission_mode); Claude Code applies them in the order they come,
// before it takes the user message written after them (measured with
// 2.1.197: the very next model request carries the new model), so
// nothing waits for their answers. A switch is in force once Claude Code
// answers it with success; one it refuses is a warning of the turn, which
// runs with what was in force, and the next turn that asks for it asks
// again.
//
// A switch to a lower permission mode is the exception: the turn must
// never run above the permission it asked for, so its prompt waits for
// Claude Code's answer (see Decode). Taken, the prompt goes; refused, the
// turn ends without running, failed.
func (p *protocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	var lines [][]byte
	if t.Model != "" && t.Model != p.model {
		model := t.Model
		line, _ := p.switchTo(map[string]any{"subtype": "set_model", "model": model},
			"the model to "+model, func() { p.model = model })
		lines = append(lines, line)
	}
	if t.Permission != "" {
		mode, ok := permissionMode(t.Permission)
		if !ok {
			return nil, fmt.Errorf("%w: unknown permission %q", invoker.ErrInvalidRequest, string(t.Permission))
		}
		switch {
		case p.asking:
			// The mode stays "default", so that Claude Code asks; the
			// protocol's ceiling changes.
			p.ceiling = t.Permission
		case mode != p.mode:
			line, id := p.switchTo(map[string]any{"subtype": "set_permission_mode", "mode": mode},
				"the permission mode to "+mode, func() { p.mode = mode })
			lines = append(lines, line)
			if modeRank(mode) < modeRank(p.mode) {
				p.lowering = id
			}
		}
	}
	b, err := userLine(t.Prompt, "")
	if err != nil {
		return nil, err
	}
	p.dec = newDecoder()
	clear(p.steers)
	p.interrupted, p.owed, p.cut, p.ended, p.between = false, false, false, false, false
	p.refused = ""
	if p.lowering != "" {
		p.held = b
		return lines, nil
	}
	return append(lines, b), nil
}

// modeRank orders Claude Code's permission modes as the levels they stand
// for (see permissionMode): a lower rank allows less.
func modeRank(mode string) int {
	switch mode {
	case "default":
		return 0
	case "acceptEdits":
		return 1
	}
	return 2 // bypassPermissions, or a mode this package does not send
}

// Steer writes prompt as a user message during the turn, carrying a uuid
// of ours. Claude Code queues it: if a tool is running, it hands the
// message to the model with the tool's result, in the same turn of its
// own; if the model is writing its answer, the turn ends with its result
// and the message starts a turn of the CLI's own, ending with a second
// result. Queued messages taken together are joined into one (measured
// with 2.1.197). Either way the CLI replays the message with our uuid
// (--replay-user-messages) before the answer to it, and the turn ends at
// the first result after every steer has been replayed. An interrupted
// turn ends at the result of the CLI's turn that takes its pending
// steers, which is interrupted as it starts (its system init): the steers
// of a cancelled turn are cancelled with it, and no result of theirs is
// left to end the next turn early.
func (p *protocol) Steer(prompt string) ([][]byte, error) {
	if p.ended {
		return nil, fmt.Errorf("%w: the turn has ended; send the message with Session.Turn", invoker.ErrInvalidRequest)
	}
	id := p.newID()
	b, err := userLine(prompt, id)
	if err != nil {
		return nil, err
	}
	p.steers[id] = true
	return [][]byte{b}, nil
}

func (p *protocol) Interrupt() [][]byte {
	p.interrupted = true
	if p.held != nil {
		// The prompt waits for a lowering switch's answer: nothing runs
		// to interrupt. The turn ends, not run, with that answer.
		return nil
	}
	if p.between && len(p.steers) > 0 {
		// The CLI is between the turn's first result and the turn of
		// its own that takes the steers: this interrupt stops nothing
		// there, so that turn is owed one as it starts.
		p.owed = true
		clear(p.steers)
	}
	return [][]byte{p.interrupt()}
}

func (p *protocol) interrupt() []byte {
	return p.control(map[string]any{"subtype": "interrupt"})
}

// control returns a control request with a new request id.
func (p *protocol) control(req map[string]any) []byte {
	b, _ := p.request(req)
	return b
}

// request returns a control request with a new request id, and the id.
func (p *protocol) request(req map[string]any) ([]byte, string) {
	p.requests++
	id := "clinvoke-" + strconv.Itoa(p.requests)
	b, _ := json.Marshal(map[string]any{
		"type":       "control_request",
		"request_id": id,
		"request":    req,
	})
	return b, id
}

// switchTo returns the control request of a switch, whose success calls
// take, and its request id.
func (p *protocol) switchTo(req map[string]any, what string, take func()) ([]byte, string) {
	b, id := p.request(req)
	p.switches[id] = pendingSwitch{what: what, take: take}
	return b, id
}

// userLine returns the user message carrying prompt; id, when not empty,
// is its uuid.
func userLine(prompt, id string) ([]byte, error) {
	m := userMessage{Type: "user", UUID: id}
	m.Message.Role, m.Message.Content = "user", prompt
	return json.Marshal(m)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (p *protocol) Decode(line []byte) (driver.Step, error) {
	var c controlLine
	if json.Unmarshal(line, &c) == nil {
		switch c.Type {
		case "control_response":
			ev := invoker.Event{Kind: invoker.KindRaw, Raw: line}
			var sw pendingSwitch
			var isSwitch bool
			if c.Response != nil {
				sw, isSwitch = p.switches[c.Response.RequestID]
				delete(p.switches, c.Response.RequestID)
			}
			switch {
			case c.Response != nil && c.Response.Subtype == "error" && isSwitch:
				ev.Kind, ev.Text = invoker.KindWarning, "claude refused to switch "+sw.what+" ("+c.Response.Error+"); the turn runs with the one in force, and the next turn that asks for it asks again"
			case c.Response != nil && c.Response.Subtype == "error":
				ev.Kind, ev.Text = invoker.KindWarning, "claude refused a control request: "+c.Response.Error
			case isSwitch:
				sw.take()
			}
			if isSwitch && c.Response.RequestID == p.lowering {
				return p.lowered(ev, sw.what, c.Response.Subtype != "error", c.Response.Error), nil
			}
			// The answer to initialize, success or not, says the CLI
			// reads its input: the session is ready.
			ready := c.Response != nil && c.Response.RequestID == initID
			return driver.Step{Events: []invoker.Event{ev}, Ready: ready}, nil
		case "control_cancel_request":
			// The CLI withdrew a request of its own (a can_use_tool
			// when the turn is interrupted): it is not answered.
			delete(p.waiting, c.RequestID)
			return driver.Step{Events: []invoker.Event{{Kind: invoker.KindRaw, Raw: driver.ValidJSON(bytes.Clone(line))}}}, nil
		case "control_request":
			var sub struct {
				Subtype    string          `json:"subtype"`
				ServerName string          `json:"server_name"`
				Message    json.RawMessage `json:"message"`
			}
			_ = json.Unmarshal(c.Request, &sub)
			switch sub.Subtype {
			case "can_use_tool":
				return p.canUseTool(c.RequestID, c.Request, line), nil
			case "mcp_message":
				return p.mcpMessage(c.RequestID, sub.ServerName, sub.Message, line), nil
			}
			// Another request of the CLI's own (hook_callback, ...):
			// refuse it, so that no turn waits on us.
			reply, _ := json.Marshal(map[string]any{
				"type": "control_response",
				"response": map[string]string{
					"subtype": "error", "request_id": c.RequestID,
					"error": "not supported by clinvoke",
				},
			})
			ev := invoker.Event{Kind: invoker.KindWarning, Raw: driver.ValidJSON(line),
				Text: "claude sent a control request clinvoke does not answer; refused it"}
			return driver.Step{Events: []invoker.Event{ev}, Write: [][]byte{reply}}, nil
		}
	}
	var step driver.Step
	if len(p.steers) > 0 || p.owed {
		var u struct {
			Type     string `json:"type"`
			Subtype  string `json:"subtype"`
			IsReplay bool   `json:"isReplay"`
			UUID     string `json:"uuid"`
		}
		if json.Unmarshal(line, &u) == nil {
			switch {
			case u.Type == "user" && u.IsReplay:
				delete(p.steers, u.UUID)
			case u.Type == "system" && u.Subtype == "init":
				p.between = false
				if p.owed && !p.cut {
					// The CLI's turn that takes the cancelled turn's
					// steers starts: cancel it too.
					step.Write = [][]byte{p.interrupt()}
					p.cut = true
				}
			}
		}
	}
	ended := p.dec.done
	evs, err := p.dec.Decode(line)
	step.Events = evs
	if !ended && p.dec.done {
		switch {
		case len(p.steers) == 0 || p.owed:
			step.TurnEnded = true
			p.ended = true
		default:
			// A steer is still queued in the CLI: this result answers
			// what came before it, and the turn goes on in the CLI's next
			// turn, which takes the steer.
			step.Events = slices.DeleteFunc(evs, func(e invoker.Event) bool { return e.Kind == invoker.KindDone })
			p.dec = p.dec.next()
			p.between = true
			if p.interrupted {
				p.owed = true
				clear(p.steers)
			}
		}
	}
	return step, err
}

func (p *protocol) Stderr(line []byte) error { return p.dec.Stderr(line) }

// Outcome is the outcome of the turn's last result. When that result
// answers the steers of an interrupted turn (owed), the turn did not
// succeed, even if the CLI answered them before the interrupt reached
// it: they were cancelled with the turn.
// lowered ends the wait of a turn's prompt for the answer to its switch to
// a lower permission mode (what; ev is the event of the answer): taken,
// the prompt goes, unless the turn was interrupted meanwhile; refused
// (with reason), the turn ends without running, and fails.
func (p *protocol) lowered(ev invoker.Event, what string, taken bool, reason string) driver.Step {
	held := p.held
	p.lowering, p.held = "", nil
	switch {
	case !taken:
		p.refused = reason
		ev.Kind = invoker.KindError
		ev.Text = "claude refused to lower " + what + " (" + reason + "); the turn did not run, since it would have run above the permission it asked for"
		p.ended = true
		return driver.Step{Events: []invoker.Event{ev}, TurnEnded: true}
	case p.interrupted:
		p.ended = true
		return driver.Step{Events: []invoker.Event{ev}, TurnEnded: true}
	}
	return driver.Step{Events: []invoker.Event{ev}, Write: [][]byte{held}}
}

func (p *protocol) Outcome(stderr string) driver.Outcome {
	if p.refused != "" {
		return driver.Outcome{Err: &invoker.StreamError{Type: "permission_switch_refused",
			Message: "claude refused to lower the permission mode (" + p.refused + "); the turn did not run, since it would have run above the permission it asked for"}}
	}
	out := p.dec.Outcome(0, stderr)
	if p.owed && out.Success {
		out.Success, out.Structured = false, nil
		out.Err = &invoker.StreamError{Message: "the turn was interrupted", Type: "interrupted"}
	}
	return out
}
