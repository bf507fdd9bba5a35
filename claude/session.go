package claude

import (
	"encoding/json"
	"strconv"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// Sessions (Invoker.OpenSession) run
//
//	claude --print --output-format=stream-json --verbose --input-format=stream-json [the flags of Command]
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

var _ driver.SessionBackend = backend{}

// SessionCommand is Command with stream-json input and no prompt.
func (b backend) SessionCommand(req *invoker.SessionRequest) (*driver.Command, error) {
	full := req.Request(invoker.TurnRequest{})
	cmd, err := b.Command(&full)
	if err != nil {
		return nil, err
	}
	// After the output flags, before the permission flags and ExtraArgs.
	args := make([]string, 0, len(cmd.Args)+1)
	args = append(args, cmd.Args[:3]...)
	args = append(args, "--input-format=stream-json")
	cmd.Args = append(args, cmd.Args[3:]...)
	cmd.Stdin = ""
	return cmd, nil
}

// NewSessionProtocol returns the driver of one stream-json session.
func (backend) NewSessionProtocol(*invoker.SessionRequest) driver.SessionProtocol {
	return &protocol{dec: newDecoder()}
}

// protocol drives one session: a decoder per turn, and the control
// requests it sent.
type protocol struct {
	dec      *decoder // the current (or last) turn's
	requests int      // control requests sent
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
}

// controlLine is a control_request or control_response, either way.
type controlLine struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   *struct {
		Subtype string `json:"subtype"`
	} `json:"request"`
	Response *struct {
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
func (p *protocol) Open() ([][]byte, bool) {
	b, _ := json.Marshal(map[string]any{
		"type":       "control_request",
		"request_id": initID,
		"request":    map[string]any{"subtype": "initialize", "hooks": nil},
	})
	return [][]byte{b}, false
}

func (p *protocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	p.dec = newDecoder()
	m := userMessage{Type: "user"}
	m.Message.Role, m.Message.Content = "user", t.Prompt
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return [][]byte{b}, nil
}

func (p *protocol) Interrupt() [][]byte {
	p.requests++
	b, _ := json.Marshal(map[string]any{
		"type":       "control_request",
		"request_id": "clinvoke-" + strconv.Itoa(p.requests),
		"request":    map[string]string{"subtype": "interrupt"},
	})
	return [][]byte{b}
}

func (p *protocol) Decode(line []byte) (driver.Step, error) {
	var c controlLine
	if json.Unmarshal(line, &c) == nil {
		switch c.Type {
		case "control_response":
			ev := invoker.Event{Kind: invoker.KindRaw, Raw: line}
			if c.Response != nil && c.Response.Subtype == "error" {
				ev.Kind, ev.Text = invoker.KindWarning, "claude refused a control request: "+c.Response.Error
			}
			// The answer to initialize, success or not, says the CLI
			// reads its input: the session is ready.
			ready := c.Response != nil && c.Response.RequestID == initID
			return driver.Step{Events: []invoker.Event{ev}, Ready: ready}, nil
		case "control_request":
			// A request of the CLI's own (can_use_tool comes only with
			// --permission-prompt-tool stdio, which sessions do not
			// pass): answer it, so that no turn waits on us.
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
	ended := p.dec.done
	evs, err := p.dec.Decode(line)
	return driver.Step{Events: evs, TurnEnded: !ended && p.dec.done}, err
}

func (p *protocol) Stderr(line []byte) error { return p.dec.Stderr(line) }

func (p *protocol) Outcome(stderr string) driver.Outcome { return p.dec.Outcome(0, stderr) }
