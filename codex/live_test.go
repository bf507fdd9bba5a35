package codex

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// The live-turn captures in testdata/live were recorded from the real
// Codex 0.169.0 by e2e/live_codex_test.go (CLINVOKE_CAPTURE=1), in the
// format of the session captures.

// loadLive reads testdata/live/name.
func loadLive(t *testing.T, name string) []golden.CaptureLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "live", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []golden.CaptureLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		l := sc.Bytes()
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		if len(l) < 2 || l[1] != ' ' {
			t.Fatalf("%s: %.40q is not a capture line", name, l)
		}
		out = append(out, golden.CaptureLine{Dir: l[0], Text: bytes.Clone(l[2:])})
	}
	return out
}

// A liveTurn is what a replayed turn produced.
type liveTurn struct {
	events []invoker.Event
	out    driver.Outcome
	ended  bool
}

// replayLive drives p through a capture as the engine drove the real CLI:
// each stdin line the protocol did not already produce is the next
// action's (a turn's start, a steer); every line it writes must be the
// captured one, byte for byte. Actions that start a turn append it to
// turns, whose events and outcome the replay fills in.
func replayLive(t *testing.T, p driver.SessionProtocol, capture []golden.CaptureLine, turns *[]*liveTurn, actions ...func() [][]byte) (opening []invoker.Event) {
	t.Helper()
	pending, _ := p.Open()
	var cur *liveTurn
	for i, l := range capture {
		switch l.Dir {
		case '>':
			for len(pending) == 0 && len(actions) > 0 {
				next := actions[0]
				actions = actions[1:]
				n := len(*turns)
				pending = append(pending, next()...)
				if len(*turns) > n {
					cur = (*turns)[n]
				}
			}
			if len(pending) == 0 {
				t.Fatalf("capture line %d: the session wrote %.200s, which the protocol did not produce", i+1, l.Text)
			}
			if !bytes.Equal(pending[0], l.Text) {
				t.Errorf("capture line %d: the protocol writes\n\t%s\nwhere the session wrote\n\t%s", i+1, pending[0], l.Text)
			}
			pending = pending[1:]
		case '<':
			st, err := p.Decode(l.Text)
			if err != nil {
				t.Fatalf("Decode(capture line %d) error = %v", i+1, err)
			}
			pending = append(pending, st.Write...)
			if cur == nil {
				opening = append(opening, st.Events...)
			} else {
				cur.events = append(cur.events, st.Events...)
			}
			if st.TurnEnded {
				if cur == nil {
					t.Fatalf("capture line %d ended a turn while none ran", i+1)
				}
				cur.out, cur.ended = p.Outcome(""), true
				cur = nil
			}
		}
	}
	if len(actions) > 0 || len(pending) > 0 {
		t.Errorf("%d actions never taken, lines never written: %q", len(actions), pending)
	}
	for i, lt := range *turns {
		if !lt.ended {
			t.Fatalf("turn %d never ended", i+1)
		}
	}
	return opening
}

// turnOf returns an action that starts the turn tr and records it.
func turnOf(t *testing.T, p driver.SessionProtocol, turns *[]*liveTurn, tr invoker.TurnRequest) func() [][]byte {
	return func() [][]byte {
		lines, err := p.StartTurn(&tr)
		if err != nil {
			t.Fatalf("StartTurn(%+v) error = %v", tr, err)
		}
		*turns = append(*turns, &liveTurn{})
		return lines
	}
}

// live replays a capture with the turns given, returning them once ended.
func live(t *testing.T, file string, req invoker.SessionRequest, trs ...invoker.TurnRequest) ([]invoker.Event, []*liveTurn) {
	t.Helper()
	req.Workdir = golden.CaptureWorkdir
	p := backend{}.NewSessionProtocol(&req)
	var turns []*liveTurn
	var actions []func() [][]byte
	for _, tr := range trs {
		actions = append(actions, turnOf(t, p, &turns, tr))
	}
	opening := replayLive(t, p, loadLive(t, file), &turns, actions...)
	return opening, turns
}

func kindsOf(evs []invoker.Event) []invoker.EventKind {
	var ks []invoker.EventKind
	for _, ev := range evs {
		if ev.Kind != invoker.KindRaw {
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

// The message's deltas come first, each a KindDelta of KindMessage, and
// the whole message follows them, equal to their sum, for Invoke (which
// Deltas sends to the app-server) as for a session.
func TestLiveDeltas(t *testing.T) {
	for _, file := range []string{"delta-invoke.jsonl", "delta-session.jsonl"} {
		t.Run(file, func(t *testing.T) {
			_, turns := live(t, file, invoker.SessionRequest{Model: "gpt-5.5", Deltas: true}, invoker.TurnRequest{Prompt: "stream the answer"})
			var joined strings.Builder
			var whole *invoker.Event
			deltas := 0
			for i, ev := range turns[0].events {
				switch ev.Kind {
				case invoker.KindDelta:
					if whole != nil {
						t.Errorf("a delta after the whole message: %q", ev.Text)
					}
					if ev.Delta != invoker.KindMessage {
						t.Errorf("delta of %v, want of %v", ev.Delta, invoker.KindMessage)
					}
					deltas++
					joined.WriteString(ev.Text)
				case invoker.KindMessage:
					whole = &turns[0].events[i]
				}
			}
			if deltas < 100 || whole == nil || whole.Text != joined.String() {
				t.Fatalf("%d deltas, whole message %v; want many deltas, then the message they add up to", deltas, whole)
			}
			out := turns[0].out
			if !out.Success || out.Text != whole.Text || out.SessionID == "" || out.Usage.InputTokens == 0 {
				t.Errorf("Outcome = %+v, want success with the message, the thread and usage", out)
			}
		})
	}
}

// TurnRequest.Model and Permission become turn/start's model, and its
// sandboxPolicy with the approval policy never, on the turn that sets
// them only: the replay writes the captured turn/start lines byte for
// byte.
func TestLiveSwitches(t *testing.T) {
	t.Run("model", func(t *testing.T) {
		_, turns := live(t, "switch-model.jsonl", invoker.SessionRequest{Model: "gpt-5.5"},
			invoker.TurnRequest{Prompt: "first"}, invoker.TurnRequest{Prompt: "second", Model: "gpt-5.4"}, invoker.TurnRequest{Prompt: "third"})
		for i, want := range []string{"one", "two", "three"} {
			if out := turns[i].out; !out.Success || out.Text != want {
				t.Errorf("turn %d: Outcome = %+v, want %q", i+1, out, want)
			}
		}
	})
	t.Run("permission", func(t *testing.T) {
		_, turns := live(t, "switch-permission.jsonl", invoker.SessionRequest{Model: "gpt-5.5", Permission: invoker.WorkspaceWrite},
			invoker.TurnRequest{Prompt: "make ro1.txt", Permission: invoker.ReadOnly},
			invoker.TurnRequest{Prompt: "make ww.txt", Permission: invoker.WorkspaceWrite},
			invoker.TurnRequest{Prompt: "make ro2.txt", Permission: invoker.ReadOnly})
		for i, lt := range turns {
			if !lt.out.Success {
				t.Errorf("turn %d: Outcome = %+v, want success", i+1, lt.out)
			}
		}
	})
	t.Run("danger-full-access", func(t *testing.T) {
		p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Permission: invoker.Unlimited})
		lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "x", Permission: invoker.Unlimited})
		if err != nil || len(lines) != 1 || !strings.Contains(string(lines[0]), `"sandboxPolicy":{"type":"dangerFullAccess"}`) {
			t.Errorf("StartTurn(Unlimited) = %q, %v; want a dangerFullAccess sandboxPolicy", lines, err)
		}
	})
}

// Steer during the turn sends turn/steer naming the running turn; Codex
// answers with the turn's id, which is no event of note, and the turn
// ends with the answer to the steered request. (Codex dropped the
// message being streamed when the steer came: its deltas have no whole
// message after them.)
func TestLiveSteer(t *testing.T) {
	req := invoker.SessionRequest{Model: "gpt-5.5", Deltas: true, Workdir: golden.CaptureWorkdir}
	p := backend{}.NewSessionProtocol(&req)
	var turns []*liveTurn
	steer := func() [][]byte {
		lines, err := backend{}.Steer(p, "STEER-7f3a also mention the weather")
		if err != nil {
			t.Fatalf("Steer() error = %v", err)
		}
		return lines
	}
	replayLive(t, p, loadLive(t, "steer.jsonl"), &turns, turnOf(t, p, &turns, invoker.TurnRequest{Prompt: "tell me something"}), steer)
	for _, ev := range turns[0].events {
		if ev.Kind == invoker.KindWarning {
			t.Errorf("warning %q: Codex took the steer", ev.Text)
		}
	}
	if out := turns[0].out; !out.Success || out.Text != "steered answer" {
		t.Errorf("Outcome = %+v, want the answer to the steered request", out)
	}
	if _, err := (backend{}).Steer(p, "late"); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("Steer() after the turn = %v, want ErrInvalidRequest", err)
	}
}

// A steer given before Codex answered turn/start waits for the turn's id;
// a refused steer becomes a warning of the turn, and its response is
// matched, not taken for another.
func TestSteerRequests(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w"})
	p.Open()
	appDecode(t, p, `{"id":1,"result":{}}`)
	appDecode(t, p, `{"id":2,"result":{"thread":{"id":"T0"}}}`)
	lines, _ := p.StartTurn(&invoker.TurnRequest{Prompt: "go"})
	if early, err := (backend{}).Steer(p, "early"); err != nil || early != nil {
		t.Fatalf("Steer() before the turn id = %q, %v; want it held back", early, err)
	}
	st := appDecode(t, p, `{"id":`+jsonInt(idOf(t, lines[0]))+`,"result":{"turn":{"id":"U1","status":"inProgress"}}}`)
	if len(st.Write) != 1 || !strings.Contains(string(st.Write[0]), `"method":"turn/steer"`) ||
		!strings.Contains(string(st.Write[0]), `"expectedTurnId":"U1"`) || !strings.Contains(string(st.Write[0]), `"text":"early"`) {
		t.Fatalf("after turn/start's answer, wrote %q; want the held steer for U1", st.Write)
	}
	accepted := idOf(t, st.Write[0])
	second, _ := backend{}.Steer(p, "second")
	st = appDecode(t, p, `{"id":`+jsonInt(idOf(t, second[0]))+`,"error":{"code":-32600,"message":"expected active turn id U1 but found none"}}`)
	if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindWarning || !strings.Contains(st.Events[0].Text, "expected active turn id") {
		t.Errorf("refused steer: events %+v, want one warning with Codex's reason", st.Events)
	}
	st = appDecode(t, p, `{"id":`+jsonInt(accepted)+`,"result":{"turnId":"U1"}}`)
	if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindRaw || len(st.Write) > 0 {
		t.Errorf("accepted steer: Step %+v, want only its raw line", st)
	}
	// Answered once: the same id again is no steer's any more.
	st = appDecode(t, p, `{"id":`+jsonInt(accepted)+`,"error":{"code":1,"message":"again"}}`)
	if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindWarning || strings.Contains(st.Events[0].Text, "steering") {
		t.Errorf("a second answer to a steer: events %+v, want the generic warning", st.Events)
	}
}

// A fork opens with thread/fork of the old thread: the session, its turn
// and the outcome are the new thread's.
func TestLiveFork(t *testing.T) {
	const orig = "01a21ae8-4a86-7152-90aa-0fc311e361d8"
	opening, turns := live(t, "fork.jsonl", invoker.SessionRequest{Model: "gpt-5.5", SessionID: orig, Fork: true},
		invoker.TurnRequest{Prompt: "prompt FORK-TWO"})
	var id string
	for _, ev := range opening {
		if ev.Kind == invoker.KindSession {
			id = ev.SessionID
		}
	}
	if id == "" || id == orig {
		t.Fatalf("opening's session event = %q, want the new thread, not %s", id, orig)
	}
	if out := turns[0].out; !out.Success || out.SessionID != id || out.Text != "answer FORK-TWO" {
		t.Errorf("Outcome = %+v, want the fork's answer on thread %s", out, id)
	}

	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", SessionID: "T9", Fork: true})
	p.Open()
	appDecode(t, p, `{"id":1,"result":{}}`)
	_, err := p.Decode([]byte(`{"id":2,"error":{"code":-32600,"message":"no rollout found for thread id T9"}}`))
	var se *invoker.StreamError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "fork thread T9") {
		t.Errorf("Decode(error) = %v, want a StreamError naming the thread to fork", err)
	}
}

// A snapshot of the rate limits is one event per window; a retried 429 is
// a warning with Retry; the turn that the limit fails matches
// ErrRateLimited and resets when the used-up window does.
func TestLiveRateLimit(t *testing.T) {
	_, turns := live(t, "rate-limit.jsonl", invoker.SessionRequest{Model: "gpt-5.5"},
		invoker.TurnRequest{Prompt: "first"}, invoker.TurnRequest{Prompt: "second"})
	limits := map[string]invoker.RateLimit{}
	for _, ev := range turns[0].events {
		if ev.Kind == invoker.KindRateLimit {
			limits[ev.RateLimit.Limit] = *ev.RateLimit
		}
	}
	reset := time.Unix(1795751344, 0)
	want := map[string]invoker.RateLimit{
		"primary":   {Limit: "primary", UsedPercent: 100, ResetsAt: reset},
		"secondary": {Limit: "secondary", UsedPercent: 43, ResetsAt: reset},
	}
	if len(limits) != 2 || limits["primary"] != want["primary"] || limits["secondary"] != want["secondary"] {
		t.Errorf("rate limits = %+v, want %+v", limits, want)
	}
	if !turns[0].out.Success {
		t.Errorf("first turn: Outcome = %+v, want success", turns[0].out)
	}
	var retries []invoker.Retry
	for _, ev := range turns[1].events {
		if ev.Retry != nil {
			if ev.Kind != invoker.KindWarning {
				t.Errorf("a retry as %v, want a warning", ev.Kind)
			}
			retries = append(retries, *ev.Retry)
		}
	}
	if len(retries) != 1 || retries[0] != (invoker.Retry{Attempt: 1, MaxAttempts: 1, HTTPStatus: 429}) {
		t.Errorf("retries = %+v, want attempt 1 of 1 after a 429", retries)
	}
	out := turns[1].out
	if out.Success || !errors.Is(out.Err, invoker.ErrRateLimited) {
		t.Errorf("second turn: Outcome.Err = %v, want one matching ErrRateLimited", out.Err)
	}
	// The used-up primary window's reset; once it has passed (an hour
	// after the capture), no reason to wait.
	wantReset := reset
	if !time.Now().Before(reset) {
		wantReset = time.Time{}
	}
	if !out.ResetsAt.Equal(wantReset) {
		t.Errorf("Outcome.ResetsAt = %v, want %v", out.ResetsAt, wantReset)
	}
	// Before the reset, it is the used-up window's, not the other's.
	p := (backend{}).NewSessionProtocol(&invoker.SessionRequest{}).(*protocol)
	p.limits["primary"] = rateWindow{UsedPercent: 100, ResetsAt: ptr(reset.Unix())}
	p.limits["secondary"] = rateWindow{UsedPercent: 43, ResetsAt: ptr(reset.Add(time.Hour).Unix())}
	if got := p.resetsAt(reset.Add(-time.Minute)); !got.Equal(reset) {
		t.Errorf("resetsAt = %v, want the used-up window's %v", got, reset)
	}
}

func ptr[T any](v T) *T { return &v }

// A usage limit (the ChatGPT backend's usage_limit_reached) fails the
// turn with codexErrorInfo usageLimitExceeded, after a snapshot of the
// used-up window: the outcome resets when that window does. Lines of
// Codex 0.169.0 answered with that error by the fake model.
func TestUsageLimit(t *testing.T) {
	future := time.Now().Add(time.Hour).Truncate(time.Second)
	at := jsonInt(future.Unix())
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w"})
	p.Open()
	appDecode(t, p, `{"id":1,"result":{}}`)
	appDecode(t, p, `{"id":2,"result":{"thread":{"id":"01a21ada-4402-7682-9d6a-35312ed45981"}}}`)
	lines, _ := p.StartTurn(&invoker.TurnRequest{Prompt: "say hi"})
	appDecode(t, p, `{"id":`+jsonInt(idOf(t, lines[0]))+`,"result":{"turn":{"id":"01a21ada-4413-7f31-ab7f-71c8009b42ff","status":"inProgress"}}}`)
	st := appDecode(t, p, `{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"normalModelSlug":null,"primary":{"usedPercent":100,"windowDurationMins":300,"resetsAt":`+at+`},"secondary":{"usedPercent":43,"windowDurationMins":10080,"resetsAt":`+at+`},"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}},"emittedAtMs":1795746841669}`)
	if got := kindsOf(st.Events); len(got) != 2 || got[0] != invoker.KindRateLimit || got[1] != invoker.KindRateLimit {
		t.Errorf("snapshot events %v, want two rate limits", got)
	}
	const msg = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 3:33 AM."
	st = appDecode(t, p, `{"method":"error","params":{"error":{"message":"`+msg+`","codexErrorInfo":"usageLimitExceeded","additionalDetails":null,"misalignment":null},"willRetry":false,"threadId":"01a21ada-4402-7682-9d6a-35312ed45981","turnId":"01a21ada-4413-7f31-ab7f-71c8009b42ff"},"emittedAtMs":1795746841669}`)
	if len(st.Events) != 1 || st.Events[0].Kind != invoker.KindWarning || st.Events[0].Retry != nil {
		t.Errorf("final error notification: %+v, want a warning that is no retry", st.Events)
	}
	st = appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"01a21ada-4402-7682-9d6a-35312ed45981","turn":{"id":"01a21ada-4413-7f31-ab7f-71c8009b42ff","rootTurnId":"01a21ada-4413-7f31-ab7f-71c8009b42ff","items":[],"itemsView":"notLoaded","status":"failed","error":{"message":"`+msg+`","codexErrorInfo":"usageLimitExceeded","additionalDetails":null,"misalignment":null},"startedAt":1795746841,"completedAt":1795746841,"durationMs":49}},"emittedAtMs":1795746841674}`)
	appDecode(t, p, `{"id":`+jsonInt(idOf(t, st.Write[0]))+`,"result":{}}`)
	out := p.Outcome("")
	if !errors.Is(out.Err, invoker.ErrRateLimited) || !out.ResetsAt.Equal(future) {
		t.Errorf("Outcome = {Err %v, ResetsAt %v}, want ErrRateLimited resetting at %v", out.Err, out.ResetsAt, future)
	}
}

// exec prints a retry as "Reconnecting... 1/1 (... last status: 429 ...)":
// a warning with Retry; the turn fails rate-limited, with no reset
// (exec relays no rate-limit snapshot).
func TestExecRetry(t *testing.T) {
	d := newDecoder()
	var retries []invoker.Retry
	for _, l := range loadLive(t, "rate-limit-exec.jsonl") {
		if l.Dir != '<' {
			continue
		}
		evs, err := d.Decode(l.Text)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Retry != nil {
				retries = append(retries, *ev.Retry)
			}
		}
	}
	if len(retries) != 1 || retries[0] != (invoker.Retry{Attempt: 1, MaxAttempts: 1, HTTPStatus: 429}) {
		t.Errorf("retries = %+v, want attempt 1 of 1 after a 429", retries)
	}
	out := d.Outcome(1, "")
	if !errors.Is(out.Err, invoker.ErrRateLimited) || !out.ResetsAt.IsZero() {
		t.Errorf("Outcome = {Err %v, ResetsAt %v}, want ErrRateLimited and no reset", out.Err, out.ResetsAt)
	}
}

// Invoke runs in the app-server what exec cannot do: deltas and forks.
func TestInSession(t *testing.T) {
	for _, tc := range []struct {
		req  invoker.Request
		want bool
	}{
		{invoker.Request{Prompt: "p"}, false},
		{invoker.Request{Prompt: "p", SessionID: "T"}, false},
		{invoker.Request{Prompt: "p", Deltas: true}, true},
		{invoker.Request{Prompt: "p", SessionID: "T", Fork: true}, true},
	} {
		if got := (backend{}).InSession(&tc.req); got != tc.want {
			t.Errorf("InSession(%+v) = %v, want %v", tc.req, got, tc.want)
		}
	}
	c := New().Capabilities()
	if !c.Deltas || !c.Fork || !c.Steer || !c.SwitchModel || !c.SwitchPermission || !c.Sessions {
		t.Errorf("Capabilities() = %v, want deltas, fork, steer and both switches (measured with 0.169.0)", c)
	}
}
