package codex

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

func appDecode(t *testing.T, p driver.SessionProtocol, line string) driver.Step {
	t.Helper()
	st, err := p.Decode([]byte(line))
	if err != nil {
		t.Fatalf("Decode(%s) error = %v", line, err)
	}
	return st
}

func idOf(t *testing.T, line []byte) int64 {
	t.Helper()
	var m struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// The turn ends only once Codex has cleaned the thread's background
// terminals, where an interrupted tool lives on; approvals are declined.
func TestAppServerTurnEndsAfterClean(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", SessionID: "T0"})
	p.Open()
	st := appDecode(t, p, `{"id":1,"result":{}}`)
	if len(st.Write) != 2 || !strings.Contains(string(st.Write[1]), `"thread/resume"`) || !strings.Contains(string(st.Write[1]), `"sandbox":"read-only"`) {
		t.Fatalf("after initialize, wrote %q; want initialized and a read-only thread/resume", st.Write)
	}
	if st = appDecode(t, p, `{"id":2,"result":{"thread":{"id":"T0"}}}`); !st.Ready {
		t.Fatal("not ready after thread/resume")
	}
	lines, _ := p.StartTurn(&invoker.TurnRequest{Prompt: "go"})
	turnReq := idOf(t, lines[0])
	if in := p.Interrupt(); in != nil {
		t.Errorf("Interrupt() before the turn id is known = %q, want it deferred", in)
	}
	st = appDecode(t, p, `{"id":`+jsonInt(turnReq)+`,"result":{"turn":{"id":"U1"}}}`)
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"turn/interrupt"`) || !strings.Contains(string(st.Write[0]), `"U1"`) {
		t.Errorf("deferred interrupt: wrote %q, want turn/interrupt of U1", st.Write)
	}
	st = appDecode(t, p, `{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"T0","turnId":"U1"}}`)
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"decline"`) {
		t.Errorf("approval request answered %q, want decline", st.Write)
	}
	st = appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"T0","turn":{"id":"U1","status":"interrupted"}}}`)
	if st.TurnEnded || len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"thread/backgroundTerminals/clean"`) {
		t.Fatalf("turn/completed Step = %+v, want a clean request and the turn not yet ended", st)
	}
	st = appDecode(t, p, `{"id":`+jsonInt(idOf(t, st.Write[0]))+`,"result":{}}`)
	if !st.TurnEnded || st.Events[len(st.Events)-1].Kind != invoker.KindDone {
		t.Fatalf("clean response Step = %+v, want the end of the turn", st)
	}
	if out := p.Outcome(""); out.Success || out.Err == nil || out.SessionID != "T0" {
		t.Errorf("Outcome() = %+v, want an interrupted turn of T0", out)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A thread Codex cannot start, resume or fork fails the session's opening
// with the reason, and the StreamError's Type is the method that failed.
func TestAppServerOpeningRefused(t *testing.T) {
	for _, tc := range []struct {
		req          invoker.SessionRequest
		method, what string
	}{
		{invoker.SessionRequest{}, "thread/start", "start a thread"},
		{invoker.SessionRequest{SessionID: "T9"}, "thread/resume", "resume thread T9"},
		{invoker.SessionRequest{SessionID: "T9", Fork: true}, "thread/fork", "fork thread T9"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			tc.req.Workdir = "/w"
			p := backend{}.NewSessionProtocol(&tc.req)
			p.Open()
			st := appDecode(t, p, `{"id":1,"result":{}}`)
			if len(st.Write) != 2 || !strings.Contains(string(st.Write[1]), `"method":"`+tc.method+`"`) {
				t.Fatalf("after initialize, wrote %q; want initialized and %s", st.Write, tc.method)
			}
			_, err := p.Decode([]byte(`{"id":2,"error":{"code":-32600,"message":"no rollout found for thread id T9"}}`))
			var se *invoker.StreamError
			if !errors.As(err, &se) || se.Type != tc.method || !strings.Contains(se.Message, tc.what) || !strings.Contains(se.Message, "no rollout found") {
				t.Errorf("Decode(error) = %v (%#v), want a StreamError of Type %s saying it could not %s, with Codex's reason", err, se, tc.method, tc.what)
			}
		})
	}
}
