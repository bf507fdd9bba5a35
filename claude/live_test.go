package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// The captures in testdata/live were recorded from Claude Code 2.1.197
// against internal/testkit/fakemodel: "> " lines were written to its
// standard input, "< " lines are its standard output.

// loadLive reads a capture of testdata/live.
func loadLive(t *testing.T, name string) (in, out [][]byte, order []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "live", name))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		l := sc.Bytes()
		switch {
		case bytes.HasPrefix(l, []byte("> ")):
			in = append(in, bytes.Clone(l[2:]))
			order = append(order, '>')
		case bytes.HasPrefix(l, []byte("< ")):
			out = append(out, bytes.Clone(l[2:]))
			order = append(order, '<')
		}
	}
	return in, out, order
}

// A liveCall is what a session does at a stdin line of a capture that the
// protocol has not produced on its own: start a turn, steer it or
// interrupt it.
type liveCall struct {
	turn      *invoker.TurnRequest
	steer     string
	interrupt bool
}

// A liveTurn is what one replayed turn received.
type liveTurn struct {
	events  []invoker.Event
	endedAt int // stdout line, from 1
	out     struct {
		text    string
		success bool
		err     error
		usage   invoker.Usage
		turns   int
	}
}

// replayLive drives a session protocol through a capture, as the engine
// drives it: each stdin line must be one the protocol returned (as JSON:
// the capture's hand-written lines order their keys differently), in
// order; calls are made when the capture shows a line the protocol did
// not produce.
func replayLive(t *testing.T, name string, req invoker.SessionRequest, calls []liveCall) []liveTurn {
	t.Helper()
	in, out, order := loadLive(t, name)
	p := backend{}.NewSessionProtocol(&req).(*protocol)
	ids := 0
	p.newID = func() string {
		ids++
		return "00000000-0000-4000-8000-00000000000" + string(rune('0'+ids))
	}
	pending, _ := p.Open()
	var turns []liveTurn
	inTurn := false
	ni, no := 0, 0
	for _, dir := range order {
		if dir == '>' {
			for len(pending) == 0 && len(calls) > 0 {
				c := calls[0]
				calls = calls[1:]
				switch {
				case c.turn != nil:
					lines, err := p.StartTurn(c.turn)
					if err != nil {
						t.Fatalf("StartTurn(%q) error = %v", c.turn.Prompt, err)
					}
					pending = append(pending, lines...)
					turns = append(turns, liveTurn{})
					inTurn = true
				case c.steer != "":
					lines, err := p.Steer(c.steer)
					if err != nil {
						t.Fatalf("Steer(%q) error = %v", c.steer, err)
					}
					pending = append(pending, lines...)
				case c.interrupt:
					pending = append(pending, p.Interrupt()...)
				}
			}
			if len(pending) == 0 {
				t.Fatalf("stdin line %d: the session wrote %.200s, which the protocol did not produce", ni+1, in[ni])
			}
			if !jsonEqual(pending[0], in[ni]) {
				t.Errorf("stdin line %d: the protocol writes\n\t%s\nwhere the CLI was sent\n\t%s", ni+1, pending[0], in[ni])
			}
			pending = pending[1:]
			ni++
			continue
		}
		st, err := p.Decode(out[no])
		no++
		if err != nil {
			t.Fatalf("Decode(stdout line %d) error = %v", no, err)
		}
		pending = append(pending, st.Write...)
		if inTurn {
			cur := &turns[len(turns)-1]
			cur.events = append(cur.events, st.Events...)
		}
		if st.TurnEnded {
			if !inTurn {
				t.Errorf("stdout line %d (%.80s) ended a turn while none was running", no, out[no-1])
				continue
			}
			cur := &turns[len(turns)-1]
			cur.endedAt = no
			o := p.Outcome("")
			cur.out.text, cur.out.success, cur.out.err, cur.out.usage, cur.out.turns = o.Text, o.Success, o.Err, o.Usage, o.Turns
			inTurn = false
		}
	}
	if len(calls) > 0 || len(pending) > 0 {
		t.Errorf("left over: %d calls never made, lines never written %q", len(calls), pending)
	}
	for i, tr := range turns {
		if tr.endedAt == 0 {
			t.Errorf("turn %d never ended", i+1)
		}
	}
	return turns
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// resultLines returns the numbers (from 1) of the capture's result lines.
func resultLines(t *testing.T, name string) []int {
	_, out, _ := loadLive(t, name)
	var n []int
	for i, l := range out {
		if bytes.HasPrefix(l, []byte(`{"type":"result"`)) {
			n = append(n, i+1)
		}
	}
	return n
}

func kinds(evs []invoker.Event, k invoker.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func TestLiveSessions(t *testing.T) {
	turn := func(prompt string) liveCall { return liveCall{turn: &invoker.TurnRequest{Prompt: prompt}} }
	tests := []struct {
		file  string
		req   invoker.SessionRequest
		calls []liveCall
		// check looks at the turns; results are the capture's result lines.
		check func(t *testing.T, turns []liveTurn, results []int)
	}{
		{
			// Deltas before the whole message; then a turn that switches
			// the model and lowers the permission: set_model and
			// set_permission_mode go before its prompt.
			file: "deltas-switch.jsonl",
			req:  invoker.SessionRequest{Permission: invoker.WorkspaceWrite, Deltas: true},
			calls: []liveCall{turn("first"),
				{turn: &invoker.TurnRequest{Prompt: "second", Model: "claude-haiku-4-5", Permission: invoker.ReadOnly}}},
			check: func(t *testing.T, turns []liveTurn, results []int) {
				if len(turns) != 2 {
					t.Fatalf("%d turns, want 2", len(turns))
				}
				var joined strings.Builder
				whole := -1
				for i, e := range turns[0].events {
					switch {
					case e.Kind == invoker.KindDelta:
						if e.Delta != invoker.KindMessage {
							t.Errorf("delta of %v, want of a message", e.Delta)
						}
						if whole >= 0 {
							t.Errorf("delta %q after the whole message", e.Text)
						}
						joined.WriteString(e.Text)
					case e.Kind == invoker.KindMessage:
						whole = i
						if e.Text != "one two three four" {
							t.Errorf("whole message %q", e.Text)
						}
					}
				}
				if joined.String() != "one two three four" || whole < 0 {
					t.Errorf("deltas joined %q, whole message at %d; want the answer in deltas, then whole", joined.String(), whole)
				}
				for i, tr := range turns {
					if tr.endedAt != results[i] || !tr.out.success {
						t.Errorf("turn %d ended at line %d (success %v), want at result line %d", i+1, tr.endedAt, tr.out.success, results[i])
					}
				}
				if turns[1].out.text != "switched" {
					t.Errorf("turn 2 text %q", turns[1].out.text)
				}
			},
		},
		{
			// A steer while the model writes: Claude Code ends the turn,
			// then answers the steer in a turn of its own; ours ends at
			// the second result, with one done event.
			file:  "steer-stream.jsonl",
			req:   invoker.SessionRequest{Permission: invoker.WorkspaceWrite, Deltas: true},
			calls: []liveCall{turn("first"), {steer: "steer me"}},
			check: func(t *testing.T, turns []liveTurn, results []int) {
				if len(results) != 2 || len(turns) != 1 {
					t.Fatalf("%d results, %d turns; want 2 results in 1 turn", len(results), len(turns))
				}
				tr := turns[0]
				if tr.endedAt != results[1] || !tr.out.success || tr.out.text != "steered answer" {
					t.Errorf("turn ended at %d with %q (success %v), want at the second result %d with the steer's answer", tr.endedAt, tr.out.text, tr.out.success, results[1])
				}
				if n := kinds(tr.events, invoker.KindDone); n != 1 {
					t.Errorf("%d done events, want 1", n)
				}
				if n := kinds(tr.events, invoker.KindUsage); n != 2 || tr.out.turns != 2 || tr.out.usage.OutputTokens != 10 {
					t.Errorf("usage events %d, turns %d, usage %+v; want both results' counted", n, tr.out.turns, tr.out.usage)
				}
			},
		},
		{
			// A steer while a tool runs: Claude Code hands it to the model
			// with the tool's result, in the same turn: one result.
			file:  "steer-tool.jsonl",
			req:   invoker.SessionRequest{Permission: invoker.ReadOnly},
			calls: []liveCall{turn("first"), {steer: "steer me"}},
			check: func(t *testing.T, turns []liveTurn, results []int) {
				if len(results) != 1 || len(turns) != 1 || turns[0].endedAt != results[0] || turns[0].out.text != "after tool" {
					t.Errorf("results %v, turns %+v; want the turn to end at the only result", results, turns)
				}
			},
		},
		{
			// A steer, then a cancel while the model stalls: the steer's
			// own turn is interrupted as it starts, and the turn ends at
			// its result, so no result is left for the next turn.
			file:  "steer-interrupt.jsonl",
			req:   invoker.SessionRequest{Permission: invoker.WorkspaceWrite, Deltas: true},
			calls: []liveCall{turn("first"), {steer: "steer me"}, {interrupt: true}},
			check: func(t *testing.T, turns []liveTurn, results []int) {
				if len(results) != 2 || len(turns) != 1 {
					t.Fatalf("%d results, %d turns", len(results), len(turns))
				}
				if tr := turns[0]; tr.endedAt != results[1] || tr.out.success {
					t.Errorf("turn ended at %d (success %v), want at the second result %d, failed", tr.endedAt, tr.out.success, results[1])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tt.check(t, replayLive(t, tt.file, tt.req, tt.calls), resultLines(t, tt.file))
		})
	}
}

// TestSwitchLines checks the control requests a turn's switches write: only
// for a value that changes, the permission mapped as on the command line.
func TestSwitchLines(t *testing.T) {
	tests := []struct {
		name  string
		open  invoker.SessionRequest
		turns []invoker.TurnRequest
		want  [][]string // per turn, the subtypes and values written before the prompt
	}{
		{"nothing set", invoker.SessionRequest{Model: "m"}, []invoker.TurnRequest{{Prompt: "x"}}, [][]string{nil}},
		{"same values", invoker.SessionRequest{Model: "m", Permission: invoker.WorkspaceWrite},
			[]invoker.TurnRequest{{Prompt: "x", Model: "m", Permission: invoker.WorkspaceWrite}}, [][]string{nil}},
		{"read-only is the default", invoker.SessionRequest{}, []invoker.TurnRequest{{Prompt: "x", Permission: invoker.ReadOnly}}, [][]string{nil}},
		{"model then permission, once", invoker.SessionRequest{Permission: invoker.Unlimited},
			[]invoker.TurnRequest{
				{Prompt: "a", Model: "haiku", Permission: invoker.ReadOnly},
				{Prompt: "b", Model: "haiku", Permission: invoker.ReadOnly},
				{Prompt: "c", Permission: invoker.WorkspaceWrite},
				{Prompt: "d", Permission: invoker.Unlimited},
			},
			[][]string{{"set_model haiku", "set_permission_mode default"}, nil,
				{"set_permission_mode acceptEdits"}, {"set_permission_mode bypassPermissions"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(&tt.open)
			for i, tr := range tt.turns {
				lines, err := p.StartTurn(&tr)
				if err != nil {
					t.Fatal(err)
				}
				// The switches, then the prompt: written at once, or, after
				// a switch to a lower mode, once Claude Code took it.
				var got []string
				var prompt []byte
				for len(lines) > 0 {
					l := lines[0]
					lines = lines[1:]
					var c struct {
						Type      string `json:"type"`
						RequestID string `json:"request_id"`
						Request   struct{ Subtype, Model, Mode string }
					}
					if err := json.Unmarshal(l, &c); err != nil {
						t.Fatal(err)
					}
					if c.Type != "control_request" {
						if prompt != nil || len(lines) > 0 {
							t.Errorf("turn %d writes %s, then %q: want the prompt once, last", i+1, l, lines)
						}
						prompt = l
						continue
					}
					got = append(got, strings.TrimSpace(c.Request.Subtype+" "+c.Request.Model+c.Request.Mode))
					// Claude Code takes the switch.
					st, err := p.Decode([]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"` + c.RequestID + `"}}`))
					if err != nil {
						t.Fatal(err)
					}
					lines = append(lines, st.Write...)
				}
				if !slices.Equal(got, tt.want[i]) {
					t.Errorf("turn %d writes %q before its prompt, want %q", i+1, got, tt.want[i])
				}
				if !bytes.Contains(prompt, []byte(`"type":"user"`)) || bytes.Contains(prompt, []byte(`"uuid"`)) {
					t.Errorf("turn %d's prompt %s, want its user message (with no uuid)", i+1, prompt)
				}
			}
		})
	}
}

// TestSteerLine checks the line a steer writes: a user message with a
// fresh uuid each time.
func TestSteerLine(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{}).(*protocol)
	if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "x"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		lines, err := p.Steer("look at b.go too")
		if err != nil || len(lines) != 1 {
			t.Fatalf("Steer() = %q, %v", lines, err)
		}
		var m struct {
			Type    string `json:"type"`
			UUID    string `json:"uuid"`
			Message struct{ Role, Content string }
		}
		if err := json.Unmarshal(lines[0], &m); err != nil || m.Type != "user" || m.Message.Role != "user" || m.Message.Content != "look at b.go too" || len(m.UUID) != 36 {
			t.Errorf("steer line %s, want a user message with a uuid", lines[0])
		}
		ids = append(ids, m.UUID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two steers share uuid %s", ids[0])
	}
}

// A switch is in force once Claude Code answers it with success: one it
// refuses is a warning naming it, and the next turn that wants it asks
// again; one taken is not asked again.
func TestSwitchRefused(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Permission: invoker.Unlimited}).(*protocol)
	turn := func(tr invoker.TurnRequest) (ids, what []string) {
		t.Helper()
		lines, err := p.StartTurn(&tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			var c struct {
				Type      string
				RequestID string `json:"request_id"`
				Request   struct{ Subtype, Model, Mode string }
			}
			if err := json.Unmarshal(l, &c); err != nil {
				t.Fatal(err)
			}
			if c.Type != "control_request" {
				continue // the prompt
			}
			ids = append(ids, c.RequestID)
			what = append(what, c.Request.Subtype+" "+c.Request.Model+c.Request.Mode)
		}
		return ids, what
	}
	answer := func(id, subtype string) []invoker.Event {
		t.Helper()
		st, err := p.Decode([]byte(`{"type":"control_response","response":{"subtype":"` + subtype + `","request_id":"` + id + `","error":"not now"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return st.Events
	}
	ids, what := turn(invoker.TurnRequest{Prompt: "a", Model: "haiku", Permission: invoker.ReadOnly})
	if len(ids) != 2 {
		t.Fatalf("turn 1 switches %q, want the model and the mode", what)
	}
	evs := answer(ids[0], "error")
	if len(evs) != 1 || evs[0].Kind != invoker.KindWarning || !strings.Contains(evs[0].Text, "the model to haiku") || !strings.Contains(evs[0].Text, "not now") {
		t.Errorf("refused set_model gives %+v, want a warning naming the switch and Claude Code's reason", evs)
	}
	if evs := answer(ids[1], "success"); len(evs) != 1 || evs[0].Kind != invoker.KindRaw {
		t.Errorf("a switch taken gives %+v, want a raw event", evs)
	}
	if _, what := turn(invoker.TurnRequest{Prompt: "b", Model: "haiku", Permission: invoker.ReadOnly}); !slices.Equal(what, []string{"set_model haiku"}) {
		t.Errorf("turn 2 switches %q, want the refused model asked again, and the mode taken not", what)
	}
}

// A turn cancelled while a steer it accepted is still to be answered by a
// turn of Claude Code's own never ends as a success with the steer's
// answer alone: the steers of a cancelled turn are cancelled with it. The
// lines are those of steer-stream.jsonl, with the cancel between the
// first result and the steer's own turn, where Claude Code takes the
// interrupt between turns and stops nothing. Claude Code then either runs
// the steer's turn to its end before the second interrupt reaches it, or
// obeys it.
func TestSteerCancelledBetweenTurns(t *testing.T) {
	const sid = `"session_id":"b6f913d1-18b0-4822-b5a4-f291f24710d0"`
	initLine := `{"type":"system","subtype":"init","cwd":"/w",` + sid + `,"tools":[],"model":"claude-opus-4-8","permissionMode":"acceptEdits"}`
	assistant := func(id, text string) string {
		return `{"type":"assistant","message":{"content":[{"text":"` + text + `","type":"text"}],"id":"` + id + `","model":"claude-opus-4-8","role":"assistant","type":"message"},"parent_tool_use_id":null,` + sid + `}`
	}
	result := func(text string) string {
		return `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"` + text + `",` + sid + `}`
	}
	replay := func(uuid, text string) string {
		return `{"type":"user","message":{"role":"user","content":"` + text + `"},` + sid + `,"parent_tool_use_id":null,"uuid":"` + uuid + `","isReplay":true}`
	}
	interrupted := `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"parent_tool_use_id":null,` + sid + `}`
	aborted := `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,` + sid + `}`
	tests := []struct {
		name  string
		steer []string // Claude Code's lines for the steer's own turn, after its system init
	}{
		{"the steer's turn answered before the interrupt reached it", []string{replay("00000000-0000-4000-8000-000000000001", "steer me"), assistant("msg_2", "steered answer"), result("steered answer")}},
		{"the steer's turn interrupted", []string{replay("00000000-0000-4000-8000-000000000001", "steer me"), interrupted, aborted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Permission: invoker.WorkspaceWrite}).(*protocol)
			p.newID = func() string { return "00000000-0000-4000-8000-000000000001" }
			if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "first"}); err != nil {
				t.Fatal(err)
			}
			decode := func(l string) driver.Step {
				t.Helper()
				st, err := p.Decode([]byte(l))
				if err != nil {
					t.Fatalf("Decode(%s) error = %v", l, err)
				}
				return st
			}
			decode(initLine)
			if _, err := p.Steer("steer me"); err != nil {
				t.Fatal(err)
			}
			decode(replay("9996ec5d-9d99-4757-aefe-0732c9450615", "first"))
			decode(assistant("msg_1", "one two three"))
			if st := decode(result("one two three")); st.TurnEnded {
				t.Fatal("the first result ended the turn although a steer is pending")
			}
			// The caller cancels now, between Claude Code's two turns.
			lines := p.Interrupt()
			if !interruptLines(lines) {
				t.Fatalf("Interrupt() = %q, want an interrupt request", lines)
			}
			decode(`{"type":"control_response","response":{"subtype":"success","request_id":"clinvoke-1"}}`)
			if st := decode(initLine); !interruptLines(st.Write) {
				t.Errorf("the steer's own turn started after the cancel: wrote %q, want it interrupted", st.Write)
			}
			var ended bool
			for _, l := range tt.steer {
				ended = decode(l).TurnEnded
			}
			if !ended {
				t.Fatal("the steer's turn's result did not end the turn")
			}
			out := p.Outcome("")
			if out.Success {
				t.Errorf("Outcome() = success with %q, want a cancelled turn never to succeed on the steer's answer", out.Text)
			}
			if out.Text == "" {
				t.Errorf("Outcome().Text is empty, want the partial answer the turn showed")
			}
		})
	}
}

// interruptLines reports whether lines are one interrupt control request.
func interruptLines(lines [][]byte) bool {
	if len(lines) != 1 {
		return false
	}
	var c struct {
		Type    string `json:"type"`
		Request struct{ Subtype string }
	}
	return json.Unmarshal(lines[0], &c) == nil && c.Type == "control_request" && c.Request.Subtype == "interrupt"
}

// A steer after the result that ended the turn is refused: Claude Code
// would answer it with a turn of its own, after the one that ended.
func TestSteerAfterTurnEnded(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{}).(*protocol)
	if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "x"}); err != nil {
		t.Fatal(err)
	}
	st, err := p.Decode([]byte(`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s"}`))
	if err != nil || !st.TurnEnded {
		t.Fatalf("Decode(result) = %+v, %v; want the turn ended", st, err)
	}
	if lines, err := p.Steer("too late"); !errors.Is(err, invoker.ErrInvalidRequest) || lines != nil {
		t.Errorf("Steer() after the turn's result = %q, %v; want nothing written and ErrInvalidRequest", lines, err)
	}
	if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Steer("in time"); err != nil {
		t.Errorf("Steer() during the next turn = %v, want nil", err)
	}
}

// TestLiveDecode decodes one-shot captures: a rate limit Claude Code
// reports (rate_limit_event, for a claude.ai login), a retried 429
// (api_retry, for an API key), and a fork.
func TestLiveDecode(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, evs []invoker.Event, d *decoder)
	}{
		{"rate-limit-rejected.jsonl", func(t *testing.T, evs []invoker.Event, d *decoder) {
			var rl *invoker.RateLimit
			for _, e := range evs {
				if e.Kind == invoker.KindRateLimit {
					rl = e.RateLimit
				}
			}
			resets := time.Unix(1795750800, 0)
			if rl == nil || rl.Limit != "five_hour" || rl.Status != "rejected" || !rl.ResetsAt.Equal(resets) {
				t.Errorf("rate limit event %+v, want five_hour rejected, resetting at %v", rl, resets)
			}
			out := d.Outcome(1, "")
			if !errors.Is(out.Err, invoker.ErrRateLimited) || !out.ResetsAt.Equal(resets) {
				t.Errorf("outcome error %v, resets at %v; want ErrRateLimited resetting at %v", out.Err, out.ResetsAt, resets)
			}
		}},
		{"rate-limit-retry.jsonl", func(t *testing.T, evs []invoker.Event, d *decoder) {
			var r *invoker.Retry
			for _, e := range evs {
				if e.Kind == invoker.KindWarning && e.Retry != nil {
					r = e.Retry
					if e.Text != "API retry 1/1 (status 429): rate_limit" {
						t.Errorf("retry warning text %q", e.Text)
					}
				}
			}
			if r == nil || *r != (invoker.Retry{Attempt: 1, MaxAttempts: 1, Delay: time.Second, HTTPStatus: 429}) {
				t.Errorf("retry %+v, want attempt 1 of 1 after 1s, status 429 (retry-after: 1)", r)
			}
			out := d.Outcome(1, "")
			if !errors.Is(out.Err, invoker.ErrRateLimited) || !out.ResetsAt.IsZero() {
				t.Errorf("outcome error %v, resets at %v; want ErrRateLimited with no reset time", out.Err, out.ResetsAt)
			}
		}},
		{"fork.jsonl", func(t *testing.T, evs []invoker.Event, d *decoder) {
			out := d.Outcome(0, "")
			if !out.Success || out.SessionID != "2289480d-4d49-4cca-9b0b-670f22cbc589" || out.Text != "forked answer" {
				t.Errorf("outcome %+v, want the fork's new session id and its answer", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, out, _ := loadLive(t, tt.file)
			d := newDecoder()
			var evs []invoker.Event
			for _, l := range out {
				e, err := d.Decode(l)
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, e...)
			}
			tt.check(t, evs, d)
		})
	}
}

// A turn that lowers the permission mode never runs above it: its prompt
// waits for Claude Code's answer to set_permission_mode. Taken, the prompt
// goes; refused, the turn ends without its prompt ever being written, and
// fails saying why; interrupted while it waits, the turn ends with the
// answer, and the prompt is not written either. A switch that raises the
// mode (within the session's level) does not wait.
func TestLoweringWaitsForItsAnswer(t *testing.T) {
	prompts := func(lines [][]byte) (n int) {
		for _, l := range lines {
			if bytes.Contains(l, []byte(`"type":"user"`)) {
				n++
			}
		}
		return n
	}
	answer := func(t *testing.T, p *protocol, id, subtype string) driver.Step {
		t.Helper()
		st, err := p.Decode([]byte(`{"type":"control_response","response":{"subtype":"` + subtype + `","request_id":"` + id + `","error":"mode not allowed"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		name      string
		answer    string // "success" or "error"
		interrupt bool
		wantSent  bool
		wantErr   bool
	}{
		{name: "taken", answer: "success", wantSent: true},
		{name: "refused", answer: "error", wantErr: true},
		{name: "interrupted while it waits", answer: "success", interrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Permission: invoker.Unlimited}).(*protocol)
			lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "a", Permission: invoker.ReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) != 1 || prompts(lines) != 0 {
				t.Fatalf("StartTurn lines %q, want the switch alone, the prompt held", lines)
			}
			var c struct {
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(lines[0], &c); err != nil {
				t.Fatal(err)
			}
			if tc.interrupt {
				if got := p.Interrupt(); len(got) != 0 {
					t.Errorf("Interrupt() while the prompt waits = %q, want nothing (nothing runs)", got)
				}
			}
			st := answer(t, p, c.RequestID, tc.answer)
			if sent := prompts(st.Write) == 1; sent != tc.wantSent {
				t.Errorf("after the answer, Write = %q: prompt sent %v, want %v", st.Write, sent, tc.wantSent)
			}
			if st.TurnEnded == tc.wantSent {
				t.Errorf("after the answer, TurnEnded = %v, want %v", st.TurnEnded, !tc.wantSent)
			}
			if tc.wantErr {
				out := p.Outcome("")
				var se *invoker.StreamError
				if out.Success || !errors.As(out.Err, &se) || !strings.Contains(se.Message, "mode not allowed") {
					t.Errorf("Outcome() = %+v, want a failure naming Claude Code's reason", out)
				}
				if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindError {
					t.Errorf("events %+v, want one error event", st.Events)
				}
			}
		})
	}
	t.Run("raising does not wait", func(t *testing.T) {
		p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Permission: invoker.Unlimited}).(*protocol)
		p.mode = "default"
		lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "a", Permission: invoker.WorkspaceWrite})
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != 2 || prompts(lines) != 1 {
			t.Errorf("StartTurn lines %q, want the switch and the prompt", lines)
		}
	})
}
