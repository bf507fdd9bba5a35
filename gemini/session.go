package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clinvoke/clinvoke/internal/acp"
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
// Unlimited, session/set_mode "yolo" (see acpModes). A
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
// and fetching only, WorkspaceWrite also editing, deleting and moving files
// inside the working directory (each path judged as internal/workspace
// judges it: links followed, Gemini's own memory and configuration
// outside), Unlimited (whose yolo mode asks nothing) everything. A tool of
// a server of the request is allowed at every level when Gemini's call id
// proves it (mcp_SERVER_TOOL__...), never by its title, which for a shell
// call is the command line the model wrote. Gemini's cold start
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
// session/set_mode with the mode of the level ("default" for ReadOnly and
// WorkspaceWrite, "yolo"), after which the session also answers permission
// requests at the new level. Gemini handles requests concurrently, so the
// turn's session/prompt is sent only once Gemini has answered every
// switch; a refused switch ends the turn with its error before the prompt.
// Gemini streams "[MODE_UPDATE] MODE" as an agent message when its mode
// changes; that notice is no text of the turn.
//
// The protocol is internal/acp's, the client of every agent that speaks
// ACP (package invoker/acp); this file configures it for Gemini: its
// modes, tool names, error classification, the retries and login prompt
// it reports on standard error, and the prompt's size limit.

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
	// With MCP servers Gemini keeps running after the end of its input
	// (its MCP connections hold it up; measured with 0.61.0): Close
	// stops it with the ladder after a second.
	return &driver.Command{Args: append(args, req.ExtraArgs...), RunsPastEOF: len(req.MCPServers) > 0}, nil
}

// NewSessionProtocol returns the ACP client of one session, configured for
// Gemini. The command line's --model chooses the session's model, so the
// protocol switches models for turns only.
func (backend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	s := &session{now: time.Now, approve: req.Approve != nil}
	r := *req
	r.Model = ""
	s.Protocol = acp.New(&acp.Config{
		Name:        "gemini",
		Modes:       acpModes,
		ToolName:    acp.GeminiToolName,
		AllowAlways: allowAlways,
		Classify: func(code int, msg string) error {
			if code == 429 {
				// Gemini answers a turn that its retries did not get
				// past a rate limit with the HTTP status as the code.
				return invoker.ErrRateLimited
			}
			return classify(msg)
		},
		ResetsAt: func(msg string) time.Time {
			if at := resetTime(msg, s.now()); !at.IsZero() {
				return at
			}
			return s.retries.resetsAt
		},
		Notices: func(raw json.RawMessage) []invoker.Event { return s.retries.events(raw) },
		Stderr: func(line []byte) error {
			s.retries.stderr(line, s.now())
			return stallSignature(line)
		},
		CheckTurn: func(t *invoker.TurnRequest) error {
			if n := utf16Len(t.Prompt); n > maxStdin {
				// Not a limit of ACP; kept so that a prompt Invoke
				// refuses is not accepted here.
				return fmt.Errorf("%w: the prompt is %d UTF-16 code units long; gemini takes at most %d", invoker.ErrInvalidRequest, n, maxStdin)
			}
			return nil
		},
	}, &r)
	return s
}

// acpModes are the ACP session modes of the permission levels: yolo for
// Unlimited; Gemini's "default" mode, the one a session opens in, for the
// others. WorkspaceWrite is not Gemini's autoEdit: in autoEdit Gemini
// writes, without asking, every file its own rules allow, and they allow
// its memory and configuration (~/.gemini/GEMINI.md, ~/.gemini/tmp/),
// which every later session of the user reads (measured with 0.61.0). In
// the default mode Gemini asks before each edit, and the session answers
// by the edit's paths (internal/acp): inside the working directory
// allowed, anywhere else rejected.
var acpModes = map[invoker.Permission]string{invoker.Unlimited: "yolo"}

// acpMode returns the session mode of a permission level.
func acpMode(p invoker.Permission) string {
	if m := acpModes[p]; m != "" {
		return m
	}
	return "default"
}

// A session is internal/acp's protocol with what only Gemini needs: the
// retries its standard error reports, the mode notice of a turn's switch
// of level dropped, and the session event first in every turn.
type session struct {
	*acp.Protocol
	now     func() time.Time
	approve bool     // the session has an Approve callback: its mode never changes
	retries retryLog // under the engine's decoder lock, as the protocol
	// modeNote is the text Gemini streams as an agent message when a
	// turn's switch changes the mode ("[MODE_UPDATE] yolo"): a notice of
	// the switch, not the model's; "" when the turn switches no level.
	modeNote string
}

// StartTurn notes the mode notice the turn's switch of level may bring,
// and starts the turn; the retries noted before it are not its.
func (s *session) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	s.modeNote = ""
	if t.Permission != "" && !s.approve {
		s.modeNote = "[MODE_UPDATE] " + acpMode(t.Permission)
	}
	s.retries = retryLog{}
	return s.Protocol.StartTurn(t)
}

// Decode drops the turn's mode notice and hands every other line to the
// protocol.
func (s *session) Decode(line []byte) (driver.Step, error) {
	if s.modeNote != "" && bytes.Contains(line, []byte(s.modeNote)) && isChunk(line, s.modeNote) {
		return driver.Step{}, nil
	}
	st, err := s.Protocol.Decode(line)
	if evs := st.Events; len(evs) >= 2 && evs[0].Kind == invoker.KindRaw && evs[1].Kind == invoker.KindSession {
		// The session's first turn opens with the initialize response:
		// a turn's first event is its session, as Invoke's.
		evs[0], evs[1] = evs[1], evs[0]
	}
	if st.TurnEnded {
		s.modeNote = ""
	}
	return st, err
}

// isChunk reports whether line is a session/update streaming text as the
// whole of an agent message chunk.
func isChunk(line []byte, text string) bool {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	return json.Unmarshal(line, &m) == nil && m.Method == "session/update" &&
		m.Params.Update.SessionUpdate == "agent_message_chunk" && m.Params.Update.Content.Text == text
}

// allowAlways chooses Gemini's "for this session" answer: for an MCP
// server of the request, all of its tools (proceed_always_server); else
// the call's tool (proceed_always_tool for an MCP tool, proceed_always
// for the others). Never proceed_always_and_save, which writes the
// approval into the user's settings for every later session.
func allowAlways(ids []string, server bool) string {
	want := []string{"proceed_always_tool", "proceed_always"}
	if server {
		want = []string{"proceed_always_server", "proceed_always_tool", "proceed_always"}
	}
	for _, w := range want {
		for _, id := range ids {
			if id == w {
				return id
			}
		}
	}
	for _, id := range ids {
		if id != "proceed_always_and_save" {
			return id
		}
	}
	return ""
}
