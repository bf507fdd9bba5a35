package gemini

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// acpDecode feeds one line to p and fails the test on a fatal error.
func acpDecode(t *testing.T, p driver.SessionProtocol, line string) driver.Step {
	t.Helper()
	st, err := p.Decode([]byte(line))
	if err != nil {
		t.Fatalf("Decode(%s) error = %v", line, err)
	}
	return st
}

// openACP runs the handshake of a session with permission perm and
// returns the protocol, ready for a turn.
func openACP(t *testing.T, perm invoker.Permission) driver.SessionProtocol {
	t.Helper()
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: perm})
	lines, ready := p.Open()
	if ready || len(lines) != 1 || !strings.Contains(string(lines[0]), `"initialize"`) {
		t.Fatalf("Open() = %q, %v; want initialize and not ready", lines, ready)
	}
	st := acpDecode(t, p, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"session/new"`) {
		t.Fatalf("after initialize, wrote %q; want session/new", st.Write)
	}
	st = acpDecode(t, p, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`)
	if mode := acpModes[perm]; mode != "" {
		if st.Ready || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"modeId":"`+mode+`"`) {
			t.Fatalf("after session/new with %s, Step = %+v; want set_mode %s", perm, st, mode)
		}
		st = acpDecode(t, p, `{"jsonrpc":"2.0","id":3,"result":{}}`)
	}
	if !st.Ready {
		t.Fatalf("the handshake did not end ready: %+v", st)
	}
	return p
}

func TestACPPermissionAnswers(t *testing.T) {
	ask := func(kind string) string {
		return `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S1","options":[` +
			`{"optionId":"proceed_always","kind":"allow_always"},{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],` +
			`"toolCall":{"toolCallId":"x","title":"t","locations":[{"path":"/w/a.txt"}],"kind":"` + kind + `"}}}`
	}
	for _, tc := range []struct {
		perm  invoker.Permission
		kind  string
		allow bool
	}{
		{invoker.ReadOnly, "read", true},
		{invoker.ReadOnly, "edit", false},
		{invoker.ReadOnly, "execute", false},
		{invoker.WorkspaceWrite, "edit", true},
		{invoker.WorkspaceWrite, "execute", false},
		{invoker.Unlimited, "execute", true},
	} {
		p := openACP(t, tc.perm)
		st := acpDecode(t, p, ask(tc.kind))
		want := `"optionId":"cancel"`
		if tc.allow {
			want = `"optionId":"proceed_once"`
		}
		if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), want) || !strings.Contains(string(st.Write[0]), `"id":0`) {
			t.Errorf("%s, %s tool: answered %q, want %s", tc.perm, tc.kind, st.Write, want)
		}
	}
}

func TestACPTurn(t *testing.T) {
	p := openACP(t, invoker.ReadOnly)
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi"})
	if err != nil || len(lines) != 1 {
		t.Fatalf("StartTurn() = %q, %v", lines, err)
	}
	var call struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
	}
	json.Unmarshal(lines[0], &call)
	if call.Method != "session/prompt" {
		t.Fatalf("StartTurn wrote %s, want session/prompt", lines[0])
	}
	st := acpDecode(t, p, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}}`)
	if len(st.Events) != 3 || st.Events[0].Kind != invoker.KindSession || st.Events[1].Kind != invoker.KindRaw || st.Events[2].Text != "Hel" {
		t.Errorf("first chunk's events = %+v, want the session, the initialize response, then a delta", st.Events)
	}
	if in := p.Interrupt(); len(in) != 1 || !strings.Contains(string(in[0]), `"session/cancel"`) {
		t.Errorf("Interrupt() = %q, want session/cancel", in)
	}
	end := `{"jsonrpc":"2.0","id":` + jsonInt(call.ID) + `,"result":{"stopReason":"cancelled"}}`
	st = acpDecode(t, p, end)
	if !st.TurnEnded || st.Events[len(st.Events)-1].Kind != invoker.KindDone {
		t.Fatalf("prompt response Step = %+v, want the end of the turn", st)
	}
	out := p.Outcome("")
	var se *invoker.StreamError
	if out.Success || out.Text != "Hel" || !errors.As(out.Err, &se) || se.Type != "cancelled" {
		t.Errorf("Outcome() = %+v, want the partial text and a cancelled StreamError", out)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
