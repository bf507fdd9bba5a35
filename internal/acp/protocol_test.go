package acp

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// geminiConfig is Gemini CLI's configuration, as gemini/session.go would
// give it.
var geminiConfig = Config{
	Name:     "gemini",
	Modes:    map[invoker.Permission]string{invoker.Unlimited: "yolo"},
	ToolName: GeminiToolName,
}

// TestGeminiCaptures replays the ACP sessions of the real Gemini CLI
// 0.61.0 that gemini's tests replay (recorded by e2e's
// TestCaptureSessions): the client must write the lines the CLI was sent,
// byte for byte, and end each turn where the CLI did, with its outcome. It
// is what lets gemini/session.go become a configuration of this package.
func TestGeminiCaptures(t *testing.T) {
	readOnly := invoker.SessionRequest{Workdir: golden.CaptureWorkdir, Model: "gemini-2.5-pro"}
	unlimited := readOnly
	unlimited.Permission = invoker.Unlimited
	type want struct {
		text    string
		success bool
	}
	for _, tc := range []struct {
		file    string
		req     invoker.SessionRequest
		session string
		turns   []golden.SessionTurn
		want    []want
	}{
		{"turn.jsonl", readOnly, "f2c650be-62b4-4ce3-878a-71557b769467",
			[]golden.SessionTurn{{Prompt: "say hi"}}, []want{{"hi there friend", true}}},
		{"interrupt-stream.jsonl", readOnly, "4fab9ee5-08e2-480b-bc2d-1a880af7d96f",
			[]golden.SessionTurn{{Prompt: "stall", Interrupted: true}, {Prompt: "and now"}}, []want{{"partial words ", false}, {"after interrupt", true}}},
		{"interrupt-tool.jsonl", unlimited, "c8bf681c-336a-4011-b9e3-a6a26b37ba57",
			[]golden.SessionTurn{{Prompt: "follow", Interrupted: true}, {Prompt: "and now"}}, []want{{"", false}, {"after tool", true}}},
		{"approval.jsonl", readOnly, "a6fcb277-c7c4-4f6e-bba2-ec852e40197f",
			[]golden.SessionTurn{{Prompt: "make a file"}}, []want{{"not allowed then", true}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			// The captures are gemini's test data: one copy, read
			// from there.
			capture := golden.LoadSession(t, filepath.Join("..", "..", "..", "..", "gemini", "testdata", "session", tc.file))
			sum := golden.ReplaySession(t, New(&geminiConfig, &tc.req), capture, tc.turns)
			if len(sum.Turns) != len(tc.want) {
				t.Fatalf("replayed %d turns, want %d", len(sum.Turns), len(tc.want))
			}
			for i, w := range tc.want {
				o := sum.Turns[i].Outcome
				if o.SessionID != tc.session || o.Text != w.text || o.Success != w.success {
					t.Errorf("turn %d: outcome {%q, %q, %v}, want {%q, %q, %v}", i+1, o.SessionID, o.Text, o.Success, tc.session, w.text, w.success)
				}
				if !w.success && o.Err == "" {
					t.Errorf("turn %d: no error, want the turn's failure", i+1)
				}
			}
		})
	}
}

// proto is a Protocol under test, fed line by line.
type proto struct {
	t *testing.T
	p *Protocol
}

func newProto(t *testing.T, cfg Config, req invoker.SessionRequest) *proto {
	if req.Workdir == "" {
		req.Workdir = "/w"
	}
	return &proto{t: t, p: New(&cfg, &req)}
}

// feed decodes line, failing the test on a fatal error.
func (x *proto) feed(line string) driver.Step {
	x.t.Helper()
	st, err := x.p.Decode([]byte(line))
	if err != nil {
		x.t.Fatalf("Decode(%s) error = %v", line, err)
	}
	return st
}

// open runs the handshake of a plain agent, session S1.
func (x *proto) open() {
	x.t.Helper()
	x.openWith(`{}`)
}

// openWith runs the handshake of an agent with capabilities caps (its
// initialize response's agentCapabilities), session S1.
func (x *proto) openWith(caps string) {
	x.t.Helper()
	x.p.Open()
	x.feed(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":` + caps + `}}`)
	if st := x.feed(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","modes":{"currentModeId":"default","availableModes":[]}}}`); !st.Ready {
		x.t.Fatalf("the handshake did not end ready: %+v", st)
	}
}

func kinds(evs []invoker.Event) []invoker.EventKind {
	var out []invoker.EventKind
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}

// TestResponseIDs checks that a response is matched to its request
// whatever form its id takes.
func TestResponseIDs(t *testing.T) {
	for _, id := range []string{`1`, `"1"`, `1.0`, ` 1 `} {
		x := newProto(t, Config{}, invoker.SessionRequest{})
		x.p.Open()
		st := x.feed(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":1}}`)
		if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"session/new"`) {
			t.Errorf("id %s: after the initialize response, wrote %q; want session/new", id, st.Write)
		}
	}
}

// TestCancelBeforePrompt checks that a turn interrupted while its mode
// switch is pending ends when the switch is answered, without its prompt.
func TestCancelBeforePrompt(t *testing.T) {
	x := newProto(t, Config{Modes: map[invoker.Permission]string{invoker.ReadOnly: "plan", invoker.Unlimited: "yolo"}}, invoker.SessionRequest{Permission: invoker.Unlimited})
	x.p.Open()
	x.feed(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	x.feed(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`)
	x.feed(`{"jsonrpc":"2.0","id":3,"result":{}}`) // yolo
	lines, err := x.p.StartTurn(&invoker.TurnRequest{Prompt: "p", Permission: invoker.ReadOnly})
	if err != nil || len(lines) != 1 || !strings.Contains(string(lines[0]), `"modeId":"plan"`) {
		t.Fatalf("StartTurn() = %q, %v; want set_mode plan first", lines, err)
	}
	if got := x.p.Interrupt(); got != nil {
		t.Errorf("Interrupt() before the prompt = %q, want nothing to send", got)
	}
	st := x.feed(`{"jsonrpc":"2.0","id":4,"result":{}}`)
	if !st.TurnEnded || len(st.Write) != 0 {
		t.Fatalf("after the switch of a cancelled turn: %+v, want the turn ended and no prompt", st)
	}
	if out := x.p.Outcome(""); out.Success || out.Err == nil {
		t.Errorf("Outcome() = %+v, want a failure", out)
	}
}

// TestPermissionAnswers checks the option chosen for a request for
// permission, the Ceiling hook, and the answer during a cancelled turn.
func TestPermissionAnswers(t *testing.T) {
	const allOptions = `[{"optionId":"a1","kind":"allow_once"},{"optionId":"aa","kind":"allow_always"},{"optionId":"r1","kind":"reject_once"}]`
	for _, tc := range []struct {
		name    string
		approve func(invoker.Permission, ToolCall) bool
		kind    string
		options string
		cancel  bool
		want    string // the outcome object
	}{
		{"allowed once", nil, "read", allOptions, false, `{"optionId":"a1","outcome":"selected"}`},
		{"allowed always when no once", nil, "read", `[{"optionId":"aa","kind":"allow_always"}]`, false, `{"optionId":"aa","outcome":"selected"}`},
		{"rejected", nil, "execute", allOptions, false, `{"optionId":"r1","outcome":"selected"}`},
		{"no reject option", nil, "execute", `[{"optionId":"a1","kind":"allow_once"}]`, false, `{"outcome":"cancelled"}`},
		{"hook allows", func(p invoker.Permission, c ToolCall) bool { return c.Kind == "execute" && c.ID == "T1" }, "execute", allOptions, false, `{"optionId":"a1","outcome":"selected"}`},
		{"hook panics", func(invoker.Permission, ToolCall) bool { panic("no") }, "read", allOptions, false, `{"optionId":"r1","outcome":"selected"}`},
		{"turn cancelled", nil, "read", allOptions, true, `{"outcome":"cancelled"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newProto(t, Config{Ceiling: tc.approve}, invoker.SessionRequest{})
			x.open()
			x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
			if tc.cancel {
				x.p.Interrupt()
			}
			st := x.feed(`{"jsonrpc":"2.0","id":"req-9","method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"T1","kind":"` + tc.kind + `","title":"t"},"options":` + tc.options + `}}`)
			want := `{"id":"req-9","jsonrpc":"2.0","result":{"outcome":` + tc.want + `}}`
			if len(st.Write) != 1 || string(st.Write[0]) != want {
				t.Errorf("answer = %q, want %s", st.Write, want)
			}
		})
	}
}

// TestLines checks what single lines give during a turn and between
// turns: nothing of a turn is lost, nothing between turns is delivered,
// and what cannot be decoded is a warning or, when it breaks the
// protocol, ErrProtocol. (The first turn opens with the initialize
// response and the session.)
func TestLines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inTurn  bool
		line    string
		want    []invoker.EventKind
		wantErr error
		write   string // a substring of the one line written, if any
	}{
		{"plan in a turn", true, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"plan","entries":[]}}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"commands in a turn", true, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"update between turns", false, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"old"}}}}`, nil, nil, ""},
		{"image chunk", true, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA=="}}}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"another session's update", true, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"unknown notification", true, `{"jsonrpc":"2.0","method":"x/ping","params":{}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"unknown response id", true, `{"jsonrpc":"2.0","id":77,"result":{}}`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindRaw}, nil, ""},
		{"not JSON", true, `Loading…`, []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindWarning}, nil, ""},
		{"not JSON between turns", false, `Loading…`, nil, nil, ""},
		{"unserved request between turns", false, `{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{}}`, nil, nil, `"code":-32601`},
		{"no JSON-RPC object", true, `{"type":"log"}`, nil, ErrProtocol, ""},
		{"a JSON array", false, `[1,2]`, nil, ErrProtocol, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newProto(t, Config{}, invoker.SessionRequest{})
			x.open()
			if tc.inTurn {
				x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
			}
			st, err := x.p.Decode([]byte(tc.line))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Decode() error = %v, want %v", err, tc.wantErr)
			}
			if got := kinds(st.Events); !equalKinds(got, tc.want) {
				t.Errorf("events = %v, want %v", got, tc.want)
			}
			for _, ev := range st.Events {
				if _, err := json.Marshal(ev); err != nil {
					t.Errorf("json.Marshal(%v event) = %v", ev.Kind, err)
				}
			}
			if (tc.write != "") != (len(st.Write) == 1) || (tc.write != "" && !strings.Contains(string(st.Write[0]), tc.write)) {
				t.Errorf("wrote %q, want one line holding %q", st.Write, tc.write)
			}
		})
	}
}

func equalKinds(a, b []invoker.EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecode checks that no line makes the protocol panic, during a turn
// or between turns.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn","usage":{"inputTokens":1}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"completed","content":[{"type":"diff","path":"a"}],"rawOutput":"o"}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"options":[{"optionId":"a","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"m","data":{"details":"d"}}}`,
		`{"id":null,"result":null}`, `null`, `{}`, `[`, "\xff",
	} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, inTurn bool) {
		x := newProto(t, Config{}, invoker.SessionRequest{})
		x.open()
		if inTurn {
			x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
		}
		st, _ := x.p.Decode([]byte(line))
		for _, ev := range st.Events {
			if _, err := json.Marshal(ev); err != nil {
				t.Errorf("json.Marshal(%v event) = %v", ev.Kind, err)
			}
		}
		x.p.Outcome("")
	})
}

// TestBrokenStaysBroken checks that after a line that breaks the protocol
// no later line ends the turn: the session is being stopped.
func TestBrokenStaysBroken(t *testing.T) {
	x := newProto(t, Config{}, invoker.SessionRequest{})
	x.open()
	x.p.StartTurn(&invoker.TurnRequest{Prompt: "p"})
	if _, err := x.p.Decode([]byte(`{"hello":"world"}`)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Decode(no JSON-RPC) error = %v, want ErrProtocol", err)
	}
	st, err := x.p.Decode([]byte(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`))
	if err != nil || st.TurnEnded || len(st.Events) > 0 {
		t.Errorf("Decode(the prompt's response) after the break = %+v, %v; want nothing", st, err)
	}
	if out := x.p.Outcome(""); out.Success {
		t.Errorf("Outcome() = %+v, want no success", out)
	}
}
