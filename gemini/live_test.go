package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// stdoutLines returns the lines of testdata/name.
func stdoutLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// A liveLog is an ACP exchange of the real CLI recorded in testdata/live:
// the lines Gemini printed on stdout ('<') and stderr ('!').
type liveLog struct{ out, stderr []string }

func loadLive(t *testing.T, name string) liveLog {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "live", name))
	if err != nil {
		t.Fatal(err)
	}
	var l liveLog
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := sc.Text()
		switch {
		case strings.HasPrefix(s, "< "):
			l.out = append(l.out, s[2:])
		case strings.HasPrefix(s, "! "):
			l.stderr = append(l.stderr, s[2:])
		}
	}
	return l
}

// find returns the first of lines that contains all of subs.
func find(t *testing.T, lines []string, subs ...string) string {
	t.Helper()
	for _, l := range lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return l
		}
	}
	t.Fatalf("no line holds %q", subs)
	return ""
}

// shape describes an event as "kind" or "kind:text" (a delta as
// "delta/message:text"), for comparing streams at a glance.
func shape(evs []invoker.Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Kind.String()
		if ev.Kind == invoker.KindDelta {
			s += "/" + ev.Delta.String()
		}
		if ev.Text != "" && (ev.Kind == invoker.KindDelta || ev.Kind == invoker.KindMessage || ev.Kind == invoker.KindReasoning) {
			s += ":" + ev.Text
		}
		out = append(out, s)
	}
	return out
}

// TestStreamJSONDeltasThenMessage checks that the chunks of a message
// (stream-json's message lines with delta:true) come as deltas, and the
// whole message once, before the line that ends it: a tool call, the
// result.
func TestStreamJSONDeltasThenMessage(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"text-then-tool.stdout", []string{"session",
			"delta/message:let ", "delta/message:me ", "delta/message:look ",
			"message:let me look ", "tool_call", "tool_result",
			"delta/message:it ", "delta/message:said ", "delta/message:hi",
			"message:it said hi", "usage", "done"}},
		{"retry429.stdout", []string{"session", "delta/message:after ", "delta/message:retry", "message:after retry", "usage", "done"}},
		// The stream failed after the text: the message ends at the error
		// line, before the error.
		{"variant-no-finishReason.stdout", []string{"session", "delta/message:hi there", "message:hi there", "error", "usage", "done"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			d := newDecoder()
			evs := golden.DecodeAll(t, d, stdoutLines(t, tt.file)...)
			if got := shape(evs); !slices.Equal(got, tt.want) {
				t.Errorf("events =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

// TestStreamJSONCancelledMessage: a run stopped while a message streams
// has its deltas and the partial text, and no whole message (no line
// ended it).
func TestStreamJSONCancelledMessage(t *testing.T) {
	lines := stdoutLines(t, "text-then-tool.stdout")
	d := newDecoder()
	evs := golden.DecodeAll(t, d, lines[:4]...) // init, the echo, "let ", "me "
	if got, want := shape(evs), []string{"session", "delta/message:let ", "delta/message:me "}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if out := d.Outcome(0, ""); out.Text != "let me " || out.Success {
		t.Errorf("Outcome() = %+v, want the partial text and no success", out)
	}
}

// TestACPDeltasThenMessage replays the ACP lines of the same turn as
// TestStreamJSONDeltasThenMessage, recorded from gemini --acp 0.61.0: the
// mode notice of the open is not the turn's, the chunks are deltas, and
// each message comes whole before the tool call and before the turn's end.
func TestACPDeltasThenMessage(t *testing.T) {
	log := loadLive(t, "acp-text-then-tool.log")
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/capture/workdir", Permission: invoker.Unlimited})
	p.Open()
	var evs []invoker.Event
	for _, l := range log.out {
		if strings.Contains(l, `"id":3,"result"`) { // set_mode answered: the session is open
			acpDecode(t, p, l)
			if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "look"}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		evs = append(evs, acpDecode(t, p, l).Events...)
	}
	// The raw events are Gemini's initialize response, with which the
	// session's first turn opens, and its list of commands
	// (available_commands_update), which came after the turn started.
	want := []string{"session", "raw", "raw",
		"delta/message:let ", "delta/message:me ", "delta/message:look ",
		"message:let me look ", "tool_call", "tool_result",
		"delta/message:it ", "delta/message:said ", "delta/message:hi",
		"message:it said hi", "usage", "done"}
	var turn []invoker.Event
	for i, ev := range evs {
		if ev.Kind == invoker.KindSession && i > 0 {
			turn = evs[i:] // the open's own session event came first
			break
		}
	}
	if got := shape(turn); !slices.Equal(got, want) {
		t.Errorf("turn events =\n  %q\nwant\n  %q", got, want)
	}
	if out := p.Outcome(""); !out.Success || out.Text != "let me look \n\nit said hi" {
		t.Errorf("Outcome() = %+v, want success and both messages", out)
	}
}

// TestACPThoughtThenMessage: a thought streams as reasoning deltas and
// comes whole where the message starts; an interrupted message comes whole
// at the turn's end. (The thought line has the shape of
// packages/cli/src/acp/acpSession.ts: "**subject**\ndescription".)
func TestACPThoughtThenMessage(t *testing.T) {
	p := openACP(t, invoker.ReadOnly)
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi"})
	if err != nil || len(lines) != 1 {
		t.Fatalf("StartTurn() = %q, %v", lines, err)
	}
	chunk := func(kind, text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"` + kind + `","content":{"type":"text","text":"` + text + `"}}}}`
	}
	var evs []invoker.Event
	for _, l := range []string{
		chunk("agent_thought_chunk", `**Greeting**\n`),
		chunk("agent_thought_chunk", "Say hi back."),
		chunk("agent_message_chunk", "Hel"),
		chunk("agent_message_chunk", "lo"),
		`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"cancelled"}}`,
	} {
		evs = append(evs, acpDecode(t, p, l).Events...)
	}
	// The session's first turn opens with its session and Gemini's
	// initialize response.
	want := []string{"session", "raw", "delta/reasoning:**Greeting**\n", "delta/reasoning:Say hi back.",
		"reasoning:**Greeting**\nSay hi back.", "delta/message:Hel", "delta/message:lo", "message:Hello", "done"}
	if got := shape(evs); !slices.Equal(got, want) {
		t.Errorf("events =\n  %q\nwant\n  %q", got, want)
	}
	if out := p.Outcome(""); out.Text != "Hello" || out.Success {
		t.Errorf("Outcome() = %+v, want the partial text of a cancelled turn", out)
	}
}

// TestRetryInfoResetsAt checks that a rate limit whose error says when to
// retry (Gemini appends "Suggested retry after 2s." for a
// google.rpc.RetryInfo of 2s) sets Outcome.ResetsAt, counted from the
// result line's timestamp (stream-json) or from when the error was read
// (ACP, whose lines carry no time), and that the error matches
// ErrRateLimited.
func TestRetryInfoResetsAt(t *testing.T) {
	t.Run("stream-json", func(t *testing.T) {
		d := newDecoder()
		golden.DecodeAll(t, d, stdoutLines(t, "err429-retryinfo.stdout")...)
		out := d.Outcome(173, "")
		want := time.Date(2026, 11, 27, 3, 3, 5, 538e6, time.UTC) // 03:03:03.538Z + 2s
		if !out.ResetsAt.Equal(want) || !errors.Is(out.Err, invoker.ErrRateLimited) {
			t.Errorf("Outcome() ResetsAt = %v, Err = %v; want %v and ErrRateLimited", out.ResetsAt, out.Err, want)
		}
	})
	t.Run("stream-json without RetryInfo", func(t *testing.T) {
		d := newDecoder()
		golden.DecodeAll(t, d, stdoutLines(t, "err429-noretry.stdout")...)
		if out := d.Outcome(173, ""); !out.ResetsAt.IsZero() || !errors.Is(out.Err, invoker.ErrRateLimited) {
			t.Errorf("Outcome() ResetsAt = %v, Err = %v; want none and ErrRateLimited", out.ResetsAt, out.Err)
		}
	})
	t.Run("acp", func(t *testing.T) {
		log := loadLive(t, "acp-err429-retryinfo.log")
		p := openACP(t, invoker.ReadOnly).(*session)
		now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
		p.now = func() time.Time { return now }
		if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi"}); err != nil {
			t.Fatal(err)
		}
		// The recorded answer to the session's first prompt (id 3 there,
		// 4 here).
		st := acpDecode(t, p, strings.Replace(find(t, log.out, `"id":3,"error"`), `"id":3`, `"id":4`, 1))
		out := p.Outcome("")
		if !st.TurnEnded || !out.ResetsAt.Equal(now.Add(2*time.Second)) || !errors.Is(out.Err, invoker.ErrRateLimited) {
			t.Errorf("Outcome() ResetsAt = %v, Err = %v (turn ended %v); want %v and ErrRateLimited", out.ResetsAt, out.Err, st.TurnEnded, now.Add(2*time.Second))
		}
	})
}

// TestResetTime covers the delays Gemini writes.
func TestResetTime(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		msg  string
		want time.Duration // -1: no reset time
	}{
		{"Resource has been exhausted.\nSuggested retry after 7s.", 7 * time.Second},
		{"Quota exceeded for metric: generate_content_free_tier_requests\nSuggested retry after 60s.", time.Minute},
		{"You exceeded your current quota. Please retry in 34.5s.", 34500 * time.Millisecond},
		{"Please retry in 300ms", 300 * time.Millisecond},
		{"You have exhausted your daily quota on this model.", -1},
		{"Suggested retry after soon.", -1},
	} {
		got := resetTime(tc.msg, at)
		if (tc.want < 0 && !got.IsZero()) || (tc.want >= 0 && !got.Equal(at.Add(tc.want))) {
			t.Errorf("resetTime(%q) = %v, want %v after %v", tc.msg, got, tc.want, at)
		}
	}
}

// TestRetryWarnings checks that the retries Gemini reports on stderr
// (general.maxAttempts 2) come as KindWarning events with Event.Retry,
// with the next line of stdout and before its own events; "Max attempts
// reached" is no retry.
func TestRetryWarnings(t *testing.T) {
	wantRetry := func(t *testing.T, evs []invoker.Event, delay time.Duration, after, before time.Time) {
		t.Helper()
		if len(evs) == 0 || evs[0].Kind != invoker.KindWarning || evs[0].Retry == nil {
			t.Fatalf("events = %q, want a retry warning first", shape(evs))
		}
		r := evs[0].Retry
		if r.Attempt != 1 || r.Delay != delay || r.ResetsAt.Before(after.Add(2*time.Second)) || r.ResetsAt.After(before.Add(2*time.Second)) {
			t.Errorf("Retry = %+v, want attempt 1, delay %v, a reset 2s after the stderr line", r, delay)
		}
		if !strings.Contains(evs[0].Text, "Resource has been exhausted") {
			t.Errorf("warning text = %q, want the error", evs[0].Text)
		}
	}
	t.Run("stream-json", func(t *testing.T) {
		lines := stdoutLines(t, "retry429.stdout")
		stderr := strings.Split(string(must(os.ReadFile("testdata/retry429.stderr"))), "\n")
		d := newDecoder()
		golden.DecodeAll(t, d, lines[:2]...) // init, the echo
		before := time.Now()
		for _, l := range stderr {
			if err := d.Stderr([]byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		after := time.Now()
		evs := golden.DecodeAll(t, d, lines[2])
		wantRetry(t, evs, 5521*time.Millisecond, before, after)
		if got := shape(evs[1:]); !slices.Equal(got, []string{"delta/message:after "}) {
			t.Errorf("events after the warning = %q, want the line's delta", got)
		}
		if evs := golden.DecodeAll(t, d, lines[3:]...); slices.ContainsFunc(evs, func(ev invoker.Event) bool { return ev.Retry != nil }) {
			t.Errorf("a retry was reported twice: %q", shape(evs))
		}
	})
	t.Run("acp", func(t *testing.T) {
		log := loadLive(t, "acp-retry429.log")
		p := openACP(t, invoker.ReadOnly).(*session)
		now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
		p.now = func() time.Time { return now }
		if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi"}); err != nil {
			t.Fatal(err)
		}
		for _, l := range log.stderr {
			if err := p.Stderr([]byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		st := acpDecode(t, p, find(t, log.out, `"text":"after "`))
		wantRetry(t, st.Events[2:], 5251*time.Millisecond, now, now) // after the initialize response and the turn's session event
	})
	t.Run("last attempt", func(t *testing.T) {
		d := newDecoder()
		for l := range strings.Lines(string(must(os.ReadFile("testdata/err429-retryinfo.stderr")))) {
			d.Stderr([]byte(strings.TrimSuffix(l, "\n")))
		}
		for _, ev := range golden.DecodeAll(t, d, stdoutLines(t, "err429-retryinfo.stdout")...) {
			if ev.Retry != nil {
				t.Errorf("a retry event for the last attempt: %+v", ev)
			}
		}
	})
	t.Run("no delay", func(t *testing.T) {
		// A 429 without details: Gemini backs off on its own and says
		// only the status.
		d := newDecoder()
		for l := range strings.Lines(string(must(os.ReadFile("testdata/retry429-plain.stderr")))) {
			d.Stderr([]byte(strings.TrimSuffix(l, "\n")))
		}
		evs := golden.DecodeAll(t, d, stdoutLines(t, "retry429-plain.stdout")[0])
		if len(evs) != 2 || evs[0].Retry == nil || *evs[0].Retry != (invoker.Retry{Attempt: 1, HTTPStatus: 429}) {
			t.Fatalf("events = %+v, want a retry of attempt 1 after a 429, then the session", evs)
		}
		if want := `gemini retries a model request (Attempt 1 failed with status 429. _ApiError: {"error":{"code":429,"message":"fake 429","status":"RESOURCE_EXHAUSTED"}})`; evs[0].Text != want {
			t.Errorf("warning = %q, want %q", evs[0].Text, want)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// switchSession opens an ACP session at perm with the session/new answer
// Gemini 0.61.0 gave (testdata/live/acp-switch.log: modes and models).
func switchSession(t *testing.T, perm invoker.Permission) driver.SessionProtocol {
	t.Helper()
	log := loadLive(t, "acp-switch.log")
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: perm, Model: "gemini-2.5-pro"})
	p.Open()
	acpDecode(t, p, find(t, log.out, `"id":1,"result"`))
	st := acpDecode(t, p, find(t, log.out, `"id":2,"result"`))
	if mode := acpModes[perm]; mode != "" {
		st = acpDecode(t, p, `{"jsonrpc":"2.0","id":3,"result":{}}`)
	}
	if !st.Ready {
		t.Fatalf("the session did not open with models to switch between: %+v", st)
	}
	return p
}

// method returns the JSON-RPC method and id of a line the session wrote.
func method(t *testing.T, line []byte) (string, int64) {
	t.Helper()
	var m struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params struct {
			ModeID  string `json:"modeId"`
			ModelID string `json:"modelId"`
		} `json:"params"`
	}
	if err := jsonUnmarshal(line, &m); err != nil {
		t.Fatalf("the session wrote %s: %v", line, err)
	}
	return m.Method + "(" + m.Params.ModeID + m.Params.ModelID + ")", m.ID
}

// TestACPSwitchSequencing checks that a turn's permission and model
// switches go first, as session/set_mode and session/set_model, each once
// Gemini has answered the one before, and its prompt only once Gemini has
// answered every one; that the mode notice Gemini streams for a switch is
// no text of the turn; that a refused switch ends the turn before its
// prompt; and that a turn interrupted before its prompt ends cancelled.
func TestACPSwitchSequencing(t *testing.T) {
	answer := func(id int64) string { return `{"jsonrpc":"2.0","id":` + jsonInt(id) + `,"result":{}}` }
	ask := `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S","options":[{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],"toolCall":{"toolCallId":"x","title":"touch f","kind":"execute"}}}`
	// one returns the method of the one line written.
	one := func(t *testing.T, lines [][]byte) (string, int64) {
		t.Helper()
		if len(lines) != 1 {
			t.Fatalf("wrote %q, want one line", lines)
		}
		return method(t, lines[0])
	}
	t.Run("model and permission", func(t *testing.T) {
		p := switchSession(t, invoker.Unlimited)
		lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi", Model: "gemini-3-flash-preview", Permission: invoker.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		m1, id1 := one(t, lines)
		if m1 != "session/set_mode(default)" {
			t.Fatalf("StartTurn() wrote %s; want set_mode default first", m1)
		}
		// Measured: the mode notice comes before the answer to set_mode.
		st := acpDecode(t, p, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"[MODE_UPDATE] default"}}}}`)
		if len(st.Events) != 0 {
			t.Errorf("the mode notice gave events %q, want none", shape(st.Events))
		}
		st = acpDecode(t, p, answer(id1))
		if st.TurnEnded {
			t.Fatalf("after one of two switches, Step = %+v; want the other", st)
		}
		if m2, _ := one(t, st.Write); m2 != "session/set_model(gemini-3-flash-preview)" {
			t.Fatalf("after set_mode, wrote %s; want set_model", m2)
		}
		st = acpDecode(t, p, answer(id1+1))
		if m, id := one(t, st.Write); m != "session/prompt()" || id != id1+2 {
			t.Fatalf("after both switches, wrote %s (id %d); want the turn's session/prompt", m, id)
		}
		// Read-only now: a shell command is refused.
		if st := acpDecode(t, p, ask); len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"optionId":"cancel"`) {
			t.Errorf("a shell call after the switch to read-only was answered %q, want cancel", st.Write)
		}
		// The same model and level again: nothing to switch.
		acpDecode(t, p, `{"jsonrpc":"2.0","id":`+jsonInt(id1+2)+`,"result":{"stopReason":"end_turn"}}`)
		lines, _ = p.StartTurn(&invoker.TurnRequest{Prompt: "again", Model: "gemini-3-flash-preview", Permission: invoker.ReadOnly})
		if m, _ := method(t, lines[0]); len(lines) != 1 || m != "session/prompt()" {
			t.Errorf("a turn with the current model and level wrote %q, want its prompt only", lines)
		}
	})
	t.Run("refused", func(t *testing.T) {
		p := switchSession(t, invoker.Unlimited)
		lines, _ := p.StartTurn(&invoker.TurnRequest{Prompt: "hi", Permission: invoker.WorkspaceWrite})
		_, id := one(t, lines)
		// The shape of the error Gemini answered for an unknown mode.
		st := acpDecode(t, p, `{"jsonrpc":"2.0","id":`+jsonInt(id)+`,"error":{"code":-32603,"message":"Internal error","data":{"details":"Invalid or unavailable mode: autoEdit"}}}`)
		if !st.TurnEnded || len(st.Write) != 0 || st.Events[len(st.Events)-1].Kind != invoker.KindDone {
			t.Fatalf("refused switch: Step = %+v; want the end of the turn and no prompt", st)
		}
		var se *invoker.StreamError
		if out := p.Outcome(""); out.Success || !errors.As(out.Err, &se) || se.Type != "session/set_mode" || !strings.Contains(se.Message, "Invalid or unavailable mode") {
			t.Errorf("Outcome() = %+v, want the refusal", out)
		}
		// Still unlimited: the next turn switches nothing, and a shell
		// command runs.
		lines, _ = p.StartTurn(&invoker.TurnRequest{Prompt: "again"})
		if m, _ := one(t, lines); m != "session/prompt()" {
			t.Errorf("the turn after a refused switch wrote %s, want its prompt only", m)
		}
		if st := acpDecode(t, p, ask); len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"optionId":"proceed_once"`) {
			t.Errorf("a shell call after a refused switch was answered %q, want proceed_once (unlimited still)", st.Write)
		}
	})
	t.Run("interrupted before the prompt", func(t *testing.T) {
		p := switchSession(t, invoker.ReadOnly)
		lines, _ := p.StartTurn(&invoker.TurnRequest{Prompt: "hi", Model: "gemini-2.5-flash"})
		_, id := one(t, lines)
		if in := p.Interrupt(); len(in) != 0 {
			t.Errorf("Interrupt() before the prompt = %q, want nothing to send", in)
		}
		st := acpDecode(t, p, answer(id))
		var se *invoker.StreamError
		if !st.TurnEnded || len(st.Write) != 0 || !errors.As(p.Outcome("").Err, &se) || se.Type != "cancelled" {
			t.Errorf("Step = %+v, Outcome = %+v; want a cancelled turn and no prompt", st, p.Outcome(""))
		}
		// The switch is kept (Gemini made it): the next turn on that
		// model switches nothing.
		lines, _ = p.StartTurn(&invoker.TurnRequest{Prompt: "again", Model: "gemini-2.5-flash"})
		if m, _ := one(t, lines); m != "session/prompt()" {
			t.Errorf("the turn after an interrupted switch wrote %s, want its prompt only", m)
		}
	})
	t.Run("no models offered", func(t *testing.T) {
		p := openACP(t, invoker.ReadOnly) // session/new without models
		if _, err := p.StartTurn(&invoker.TurnRequest{Prompt: "hi", Model: "m"}); !errors.Is(err, invoker.ErrUnsupported) {
			t.Errorf("StartTurn(Model) = %v, want ErrUnsupported", err)
		}
	})
}

var _ driver.SessionProtocol = (*session)(nil)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
