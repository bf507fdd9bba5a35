package acp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// loadingAgent is a scripted agent that loads session S1 by replaying its
// history (an earlier prompt and its answer, "first answer"), writing
// the first before updates of the replay before its session/load
// response and the rest after it. Each line the client writes is answered
// after everything the agent wrote before reading it, as an agent does
// whose replay is written by the time it reads its next request (Gemini
// CLI 0.61.0: its handler of session/load starts the replay without
// awaiting it, and returns). A prompt is answered "second answer".
type loadingAgent struct {
	t      *testing.T
	before int
	// pingResult answers an unknown method with a null result instead
	// of the error "method not found".
	pingResult bool

	out     []string // written, not yet read by the client
	methods []string // the methods of the client's requests, in order
}

func (a *loadingAgent) update(kind, text string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"` + kind + `","content":{"type":"text","text":"` + text + `"}}}}`
}

// take reads the lines the client wrote.
func (a *loadingAgent) take(lines [][]byte) {
	for _, l := range lines {
		var m message
		if err := json.Unmarshal(l, &m); err != nil {
			a.t.Fatalf("the client wrote %q: %v", l, err)
		}
		if m.Method == "" || !m.hasID() {
			continue // an answer or a notification
		}
		a.methods = append(a.methods, m.Method)
		id := string(m.ID)
		res := func(r string) string { return `{"jsonrpc":"2.0","id":` + id + `,"result":` + r + `}` }
		switch {
		case m.Method == "initialize":
			a.out = append(a.out, res(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`))
		case m.Method == "session/new":
			a.out = append(a.out, res(`{"sessionId":"S1","modes":{"currentModeId":"default","availableModes":[]}}`))
		case m.Method == "session/load":
			replay := []string{a.update("user_message_chunk", "first prompt"), a.update("agent_message_chunk", "first answer")}
			a.out = append(a.out, replay[:a.before]...)
			a.out = append(a.out, res(`{"modes":{"currentModeId":"default","availableModes":[]}}`))
			a.out = append(a.out, replay[a.before:]...)
		case m.Method == "session/set_mode":
			a.out = append(a.out, res(`{}`))
		case m.Method == "session/prompt":
			a.out = append(a.out, a.update("agent_message_chunk", "second "), a.update("agent_message_chunk", "answer"), res(`{"stopReason":"end_turn"}`))
		case a.pingResult:
			a.out = append(a.out, res(`null`))
		default:
			a.out = append(a.out, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32601,"message":"Method not found","data":{"method":"`+m.Method+`"}}}`)
		}
	}
}

// TestLoadReplay checks that the history an agent replays on session/load
// never reaches the session's first turn, whether it comes before the
// agent's response (as ACP asks) or after it (as Gemini CLI 0.61.0 sends
// it), when the program starts the turn as soon as the session is ready:
// the first turn answers "second answer" only. A new session is ready
// without the round trip a loaded one takes.
func TestLoadReplay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		resume     bool
		before     int  // replay updates before the session/load response
		pingResult bool // the agent answers the unknown method with a result
		perm       invoker.Permission
		methods    string // the client's requests, in order
	}{
		{"new session", false, 0, false, "", "initialize session/new session/prompt"},
		{"replay before the response", true, 2, false, "", "initialize session/load " + pingMethod + " session/prompt"},
		{"replay around the response (gemini)", true, 1, false, "", "initialize session/load " + pingMethod + " session/prompt"},
		{"replay after the response", true, 0, false, "", "initialize session/load " + pingMethod + " session/prompt"},
		{"unknown method answered with a result", true, 1, true, "", "initialize session/load " + pingMethod + " session/prompt"},
		{"a mode to set", true, 1, false, invoker.Unlimited, "initialize session/load " + pingMethod + " session/set_mode session/prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := invoker.SessionRequest{Workdir: "/w", Permission: tc.perm}
			if tc.resume {
				req.SessionID = "S1"
			}
			p := New(&Config{Modes: map[invoker.Permission]string{invoker.Unlimited: "yolo"}}, &req)
			a := &loadingAgent{t: t, before: tc.before, pingResult: tc.pingResult}
			open, _ := p.Open()
			a.take(open)
			started, ended := false, false
			var text []string
			for len(a.out) > 0 && !ended {
				line := a.out[0]
				a.out = a.out[1:]
				st, err := p.Decode([]byte(line))
				if err != nil {
					t.Fatalf("Decode(%s) error = %v", line, err)
				}
				a.take(st.Write)
				for _, ev := range st.Events {
					if ev.Kind == invoker.KindDelta || ev.Kind == invoker.KindMessage {
						if !started {
							t.Errorf("a %v event %q before the turn", ev.Kind, ev.Text)
						}
						if ev.Kind == invoker.KindDelta {
							text = append(text, ev.Text)
						}
					}
				}
				if st.Ready {
					if started {
						t.Fatalf("ready twice")
					}
					// The program starts its turn at once, before the
					// client has read what the agent wrote since.
					lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "second prompt"})
					if err != nil {
						t.Fatalf("StartTurn() error = %v", err)
					}
					a.take(lines)
					started = true
				}
				ended = st.TurnEnded
			}
			if !ended {
				t.Fatalf("the turn did not end (started %v); the client sent %s", started, a.methods)
			}
			out := p.Outcome("")
			if out.Text != "second answer" || !out.Success || out.SessionID != "S1" {
				t.Errorf("Outcome() = {%q, %v, %q}, want {%q, true, S1}; the turn's deltas %q", out.Text, out.Success, out.SessionID, "second answer", text)
			}
			if got := strings.Join(a.methods, " "); got != tc.methods {
				t.Errorf("the client sent %s, want %s", got, tc.methods)
			}
		})
	}
}
