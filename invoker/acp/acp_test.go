package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// run is one Invoke of the fake s, with what it returned and the events it
// delivered; it checks that nothing of the fake survived.
type run struct {
	res    *invoker.Result
	err    error
	events []invoker.Event
}

// texts returns the text of the events of kind k.
func (r *run) texts(k invoker.EventKind) []string {
	var out []string
	for _, ev := range r.events {
		if ev.Kind == k {
			out = append(out, ev.Text)
		}
	}
	return out
}

func (r *run) kinds() []invoker.EventKind {
	var out []invoker.EventKind
	for _, ev := range r.events {
		out = append(out, ev.Kind)
	}
	return out
}

// invoke runs req on the fake s, with agent changed by mod (if not nil).
func invoke(t *testing.T, s fakeagent.Script, mod func(*acp.Agent), opts invoker.Options, req invoker.Request) *run {
	t.Helper()
	return invokeWith(t, context.Background(), s, mod, opts, req)
}

// invokeCtx runs req on the fake agent s with ctx.
func invokeCtx(t *testing.T, ctx context.Context, s fakeagent.Script, req invoker.Request) *run {
	t.Helper()
	return invokeWith(t, ctx, s, nil, invoker.Options{}, req)
}

func invokeWith(t *testing.T, ctx context.Context, s fakeagent.Script, mod func(*acp.Agent), opts invoker.Options, req invoker.Request) *run {
	t.Helper()
	s.Tag = fakeagent.NewTag()
	a := fakeAgent(s)
	if mod != nil {
		mod(&a)
	}
	if req.Workdir == "" {
		req.Workdir = t.TempDir()
	}
	if req.Prompt == "" {
		req.Prompt = "hello"
	}
	r := &run{}
	req.OnEvent = func(ev invoker.Event) { r.events = append(r.events, ev) }
	r.res, r.err = acp.New(a, quick, opts).Invoke(ctx, req)
	assertGone(t, s.Tag)
	if r.res == nil {
		t.Fatalf("Invoke() returned a nil *Result (error %v)", r.err)
	}
	return r
}

// TestBadInput checks that each way an agent can misbehave ends the call
// with a clear, typed error (or, for what a session absorbs, no error), and
// leaves nothing running.
func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		s      fakeagent.Script
		opts   invoker.Options
		prompt string // "" for the default
		check  func(t *testing.T, r *run)
	}{
		{
			name: "initialize never answered",
			s:    fakeagent.Script{ACP: fakeagent.ACPOptions{SilentInit: true}},
			opts: invoker.Options{FirstEventTimeout: 300 * time.Millisecond},
			check: func(t *testing.T, r *run) {
				if !errors.Is(r.err, invoker.ErrFirstEventTimeout) {
					t.Errorf("Invoke() error = %v, want ErrFirstEventTimeout", r.err)
				}
			},
		},
		{
			name: "unknown protocol version",
			s:    fakeagent.Script{ACP: fakeagent.ACPOptions{ProtocolVersion: 2}},
			check: func(t *testing.T, r *run) {
				var ve *acp.VersionError
				if !errors.As(r.err, &ve) || ve.Client != 1 || ve.Agent != 2 {
					t.Fatalf("Invoke() error = %v, want a *acp.VersionError{Client: 1, Agent: 2}", r.err)
				}
				if !errors.Is(r.err, invoker.ErrUnsupported) {
					t.Errorf("Invoke() error = %v, want it to match ErrUnsupported", r.err)
				}
				if msg := r.err.Error(); !strings.Contains(msg, "version 2") || !strings.Contains(msg, "version 1") {
					t.Errorf("Invoke() error = %q, want both versions named", msg)
				}
			},
		},
		{
			name: "a JSON object that is no JSON-RPC message",
			s:    fakeagent.Script{ACP: fakeagent.ACPOptions{Break: "object"}},
			check: func(t *testing.T, r *run) {
				if !errors.Is(r.err, acp.ErrProtocol) || !strings.Contains(r.err.Error(), `{"hello":"world"}`) {
					t.Errorf("Invoke() error = %v, want ErrProtocol quoting the line", r.err)
				}
			},
		},
		{
			name: "a prompt response that is no object",
			s:    fakeagent.Script{ACP: fakeagent.ACPOptions{Break: "result"}, Answer: "lost in the end"},
			check: func(t *testing.T, r *run) {
				if !errors.Is(r.err, acp.ErrProtocol) || !strings.Contains(r.err.Error(), "session/prompt") {
					t.Errorf("Invoke() error = %v, want ErrProtocol naming session/prompt", r.err)
				}
				if r.res.Text != "lost in the end" {
					t.Errorf("Result.Text = %q, want the partial answer", r.res.Text)
				}
			},
		},
		{
			name: "a line that is not JSON",
			s:    fakeagent.Script{ACP: fakeagent.ACPOptions{Break: "text"}, Answer: "fine"},
			check: func(t *testing.T, r *run) {
				if r.err != nil || r.res.Text != "fine" {
					t.Errorf("Invoke() = %q, %v; want %q, nil", r.res.Text, r.err, "fine")
				}
				if w := r.texts(invoker.KindWarning); len(w) != 1 || !strings.Contains(w[0], "this line is not JSON") {
					t.Errorf("warnings = %q, want one showing the line", w)
				}
			},
		},
		{
			name:   "agent exits mid-turn",
			s:      fakeagent.Script{Answer: "partial answer", Chunks: 2, Stderr: "fakeacp: dying\n"},
			prompt: "hello " + fakeagent.PromptDie, // exit 3 after the first chunk
			check: func(t *testing.T, r *run) {
				// Invoke reads as a one-shot run: the caller opened no
				// session.
				var ee *invoker.ExitError
				if errors.Is(r.err, invoker.ErrSessionClosed) || !errors.As(r.err, &ee) || ee.ExitCode != 3 {
					t.Errorf("Invoke() error = %v, want an *ExitError of status 3, and not ErrSessionClosed", r.err)
				}
				if r.res.ExitCode != 3 || r.res.Text != "partial" || !strings.Contains(r.res.Stderr, "dying") {
					t.Errorf("Result = {ExitCode %d, Text %q, Stderr %q}, want 3, the partial answer and the stderr tail", r.res.ExitCode, r.res.Text, r.res.Stderr)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, invoke(t, tc.s, nil, tc.opts, invoker.Request{Prompt: tc.prompt}))
		})
	}
}

// TestUnservedRequests checks that every request of the agent the client
// does not serve is answered with "method not found", and the turn goes
// on.
func TestUnservedRequests(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"fs/read_text_file", "fs/write_text_file", "terminal/create", "x/unknown"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, fakeagent.Script{ACP: fakeagent.ACPOptions{ClientRequest: method}, Answer: "went on"}, nil, invoker.Options{}, invoker.Request{})
			if r.err != nil || r.res.Text != "went on" {
				t.Errorf("Invoke() = %q, %v; want %q, nil", r.res.Text, r.err, "went on")
			}
			if got := r.texts(invoker.KindReasoning); !slices.Contains(got, method+": error -32601") {
				t.Errorf("the agent saw %q, want %q", got, method+": error -32601")
			}
			if w := r.texts(invoker.KindWarning); len(w) != 1 || !strings.Contains(w[0], method) {
				t.Errorf("warnings = %q, want one naming %s", w, method)
			}
		})
	}
}

// TestEvents checks the events of a turn: the initialize response and the
// session first, then chunks as deltas and each message or thought whole
// once, tool calls and results, usage and done.
func TestEvents(t *testing.T) {
	t.Parallel()
	s := fakeagent.Script{SessionID: "events-1", ACP: fakeagent.ACPOptions{Thought: "thinking"}, Tool: true, Answer: "one two three", Chunks: 3}
	for _, deltas := range []bool{true, false} {
		r := invoke(t, s, nil, invoker.Options{}, invoker.Request{Deltas: deltas})
		if r.err != nil || r.res.Text != s.Answer || r.res.SessionID != s.SessionID {
			t.Fatalf("Invoke() = {Text %q, SessionID %q}, %v; want %q, %q, nil", r.res.Text, r.res.SessionID, r.err, s.Answer, s.SessionID)
		}
		want := []invoker.EventKind{invoker.KindRaw, invoker.KindSession, invoker.KindDelta, invoker.KindReasoning,
			invoker.KindToolCall, invoker.KindToolResult, invoker.KindDelta, invoker.KindDelta, invoker.KindDelta,
			invoker.KindMessage, invoker.KindUsage, invoker.KindDone}
		if !deltas {
			want = slices.DeleteFunc(want, func(k invoker.EventKind) bool { return k == invoker.KindDelta })
		}
		if got := r.kinds(); !slices.Equal(got, want) {
			t.Errorf("Deltas %v: event kinds = %v, want %v", deltas, got, want)
		}
		var init struct {
			ProtocolVersion int `json:"result.protocolVersion"`
			Result          struct {
				ProtocolVersion int `json:"protocolVersion"`
				AgentInfo       struct {
					Name string `json:"name"`
				} `json:"agentInfo"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.events[0].Raw, &init); err != nil || init.Result.ProtocolVersion != 1 || init.Result.AgentInfo.Name != "fakeacp" {
			t.Errorf("first event's Raw = %s, want the initialize response (version 1, agent fakeacp)", r.events[0].Raw)
		}
		if msgs := r.texts(invoker.KindMessage); !slices.Equal(msgs, []string{s.Answer}) {
			t.Errorf("messages = %q, want the answer whole, once", msgs)
		}
		if th := r.texts(invoker.KindReasoning); !slices.Equal(th, []string{"thinking"}) {
			t.Errorf("reasoning = %q, want %q", th, "thinking")
		}
		if deltas && strings.Join(r.texts(invoker.KindDelta), "") != "thinking"+s.Answer {
			t.Errorf("deltas = %q, want the thought then the answer", r.texts(invoker.KindDelta))
		}
		for _, ev := range r.events {
			if ev.Kind == invoker.KindToolResult && (ev.Tool.Name != "execute" || ev.Tool.Output != "hello" || ev.Tool.Status != "completed" || !strings.Contains(string(ev.Tool.Input), "echo hello")) {
				t.Errorf("tool result = %+v, want execute, echo hello, output hello, completed", *ev.Tool)
			}
		}
		if u := r.res.Usage; u.InputTokens != 10 || u.OutputTokens != 5 || u.TotalTokens != 15 {
			t.Errorf("Result.Usage = %+v, want 10 in, 5 out, 15 total", u)
		}
	}
}

// TestPermissions checks the answers to the agent's requests for
// permission under each level.
func TestPermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		perm invoker.Permission
		kind string
		want string // the option chosen
	}{
		{invoker.ReadOnly, "read", "allow"},
		{invoker.ReadOnly, "edit", "reject"},
		{invoker.ReadOnly, "execute", "reject"},
		{invoker.WorkspaceWrite, "edit", "allow"},
		{invoker.WorkspaceWrite, "execute", "reject"},
		{invoker.Unlimited, "execute", "allow"},
		{invoker.Unlimited, "other", "allow"},
	} {
		t.Run(string(tc.perm)+"/"+tc.kind, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, fakeagent.Script{ACP: fakeagent.ACPOptions{Permission: tc.kind}, Answer: "done"}, nil, invoker.Options{}, invoker.Request{Permission: tc.perm})
			if r.err != nil {
				t.Fatalf("Invoke() error = %v", r.err)
			}
			if got, want := r.texts(invoker.KindReasoning), "permission "+tc.kind+": "+tc.want; !slices.Contains(got, want) {
				t.Errorf("the agent saw %q, want %q", got, want)
			}
			if w := r.texts(invoker.KindWarning); (tc.want == "reject") != (len(w) == 1) {
				t.Errorf("warnings = %q, want one exactly when the call is declined", w)
			}
		})
	}
}

// TestSwitches checks that the session's mode and model follow the
// session's and then each turn's permission and model, through
// session/set_model and through a model config option, and that the
// prompt is sent only once the switch is done.
func TestSwitches(t *testing.T) {
	t.Parallel()
	modes := map[invoker.Permission]string{invoker.ReadOnly: "default", invoker.WorkspaceWrite: "autoEdit", invoker.Unlimited: "yolo"}
	for _, configModel := range []bool{false, true} {
		s := fakeagent.Script{ACP: fakeagent.ACPOptions{Modes: []string{"default", "autoEdit", "yolo"}, Models: []string{"m1", "m2"}, ConfigModel: configModel, ReportState: true}, Tag: fakeagent.NewTag()}
		a := fakeAgent(s)
		a.Modes = modes
		sess, err := acp.New(a, quick).OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Permission: invoker.Unlimited, Model: "m2"})
		if err != nil {
			t.Fatalf("OpenSession() error = %v", err)
		}
		for i, tc := range []struct {
			turn invoker.TurnRequest
			want string
		}{
			{invoker.TurnRequest{}, "mode=yolo model=m2"},
			{invoker.TurnRequest{Permission: invoker.ReadOnly}, "mode=default model=m2"},
			{invoker.TurnRequest{}, "mode=default model=m2"},
			{invoker.TurnRequest{Permission: invoker.WorkspaceWrite, Model: "m1"}, "mode=autoEdit model=m1"},
		} {
			var state []string
			tc.turn.Prompt = "state"
			tc.turn.OnEvent = func(ev invoker.Event) {
				if ev.Kind == invoker.KindReasoning {
					state = append(state, ev.Text)
				}
			}
			if _, err := sess.Turn(context.Background(), tc.turn); err != nil {
				t.Fatalf("config model %v, turn %d: Turn() error = %v", configModel, i+1, err)
			}
			if !slices.Equal(state, []string{tc.want}) {
				t.Errorf("config model %v, turn %d: the agent reported %q, want %q", configModel, i+1, state, tc.want)
			}
		}
		if err := sess.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		assertGone(t, s.Tag)
	}
}

// TestRefusedSwitch checks that a mode the agent refuses fails that turn
// only.
func TestRefusedSwitch(t *testing.T) {
	t.Parallel()
	s := fakeagent.Script{ACP: fakeagent.ACPOptions{Modes: []string{"default", "yolo"}}, Answer: "ok", Tag: fakeagent.NewTag()}
	a := fakeAgent(s)
	a.Modes = map[invoker.Permission]string{invoker.WorkspaceWrite: "bogus", invoker.Unlimited: "yolo"}
	sess, err := acp.New(a, quick).OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Permission: invoker.Unlimited})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	defer func() {
		sess.Close()
		assertGone(t, s.Tag)
	}()
	_, err = sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "x", Permission: invoker.WorkspaceWrite})
	var se *invoker.StreamError
	if !errors.As(err, &se) || se.Type != "session/set_mode" || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Turn() switching to an unknown mode: error = %v, want a *StreamError of session/set_mode naming the mode", err)
	}
	if res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "y"}); err != nil || res.Text != "ok" {
		t.Errorf("Turn() after a refused switch = %v, %v; want the answer", res, err)
	}
}

// TestRefusedByAgent checks what an agent lacks is refused, once it is
// known, with ErrUnsupported and a message that names it.
func TestRefusedByAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    fakeagent.Script
		req  invoker.Request
		want string
	}{
		{"model without models", fakeagent.Script{}, invoker.Request{Model: "m9"}, "no choice of model"},
		{"resume without loadSession", fakeagent.Script{ACP: fakeagent.ACPOptions{NoLoadSession: true}}, invoker.Request{SessionID: "s-1"}, "loadSession"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, tc.s, nil, invoker.Options{}, tc.req)
			if !errors.Is(r.err, invoker.ErrUnsupported) || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("Invoke() error = %v, want ErrUnsupported saying %q", r.err, tc.want)
			}
		})
	}
	t.Run("turn model without models", func(t *testing.T) {
		t.Parallel()
		s := fakeagent.Script{Answer: "still here", Tag: fakeagent.NewTag()}
		sess, err := acp.New(fakeAgent(s), quick).OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir()})
		if err != nil {
			t.Fatalf("OpenSession() error = %v", err)
		}
		if _, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "x", Model: "m9"}); !errors.Is(err, invoker.ErrUnsupported) {
			t.Errorf("Turn(Model) error = %v, want ErrUnsupported", err)
		}
		if res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "y"}); err != nil || res.Text != "still here" {
			t.Errorf("the next Turn() = %v, %v; want the answer", res, err)
		}
		if err := sess.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		assertGone(t, s.Tag)
	})
}

// TestResume checks that a session of an agent with loadSession resumes
// the id it was given.
func TestResume(t *testing.T) {
	t.Parallel()
	r := invoke(t, fakeagent.Script{Answer: "back"}, nil, invoker.Options{}, invoker.Request{SessionID: "resumed-7"})
	if r.err != nil || r.res.SessionID != "resumed-7" || r.res.Text != "back" {
		t.Errorf("Invoke(SessionID) = {%q, %q}, %v; want the resumed id and the answer", r.res.SessionID, r.res.Text, r.err)
	}
}

// TestStopReasons checks the error of each stop reason but end_turn.
func TestStopReasons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason string
		want   error // matched by errors.Is; nil for none
	}{
		{"max_tokens", acp.ErrMaxTokens},
		{"refusal", acp.ErrRefusal},
		{"max_turn_requests", invoker.ErrMaxTurns},
		{"cancelled", nil},
		{"banana", nil},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, fakeagent.Script{ACP: fakeagent.ACPOptions{StopReason: tc.reason}, SessionID: "stop-1", Answer: "some"}, nil, invoker.Options{}, invoker.Request{})
			var se *invoker.StreamError
			if !errors.As(r.err, &se) || se.Type != tc.reason {
				t.Fatalf("Invoke() error = %v, want a *StreamError of type %q", r.err, tc.reason)
			}
			if tc.want != nil && !errors.Is(r.err, tc.want) {
				t.Errorf("Invoke() error = %v, want it to match %v", r.err, tc.want)
			}
			var le *invoker.LimitError
			if (tc.reason == "max_turn_requests") != errors.As(r.err, &le) {
				t.Errorf("Invoke() error = %v: a *LimitError only for max_turn_requests", r.err)
			} else if le != nil && le.SessionID != "stop-1" {
				t.Errorf("LimitError.SessionID = %q, want stop-1", le.SessionID)
			}
			if r.res.Text != "some" || r.res.SessionID != "stop-1" {
				t.Errorf("Result = {%q, %q}, want the text and the session", r.res.Text, r.res.SessionID)
			}
		})
	}
}

// TestAuth checks the choice of the authentication method.
func TestAuth(t *testing.T) {
	t.Parallel()
	key := fakeagent.AuthMethod{ID: "api-key", Type: "env_var", Vars: []string{"FAKEACP_TEST_KEY"}}
	login := fakeagent.AuthMethod{ID: "login"}
	for _, tc := range []struct {
		name   string
		s      fakeagent.Script
		method string
		env    []string
		want   error // nil for success
	}{
		{"env_var method with its variable", fakeagent.Script{ACP: fakeagent.ACPOptions{AuthMethods: []fakeagent.AuthMethod{login, key}, RequireAuth: true}}, "", []string{"FAKEACP_TEST_KEY=k"}, nil},
		{"env_var method without its variable", fakeagent.Script{ACP: fakeagent.ACPOptions{AuthMethods: []fakeagent.AuthMethod{login, key}, RequireAuth: true}}, "", nil, invoker.ErrAuthRequired},
		{"chosen method", fakeagent.Script{ACP: fakeagent.ACPOptions{AuthMethods: []fakeagent.AuthMethod{login, key}, RequireAuth: true}}, "login", nil, nil},
		{"chosen method not listed", fakeagent.Script{ACP: fakeagent.ACPOptions{AuthMethods: []fakeagent.AuthMethod{key}}}, "login", nil, invoker.ErrInvalidRequest},
		{"no methods, no authentication", fakeagent.Script{}, "login", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.s.Answer = "in"
			r := invoke(t, tc.s, func(a *acp.Agent) { a.AuthMethod = tc.method }, invoker.Options{}, invoker.Request{Env: tc.env})
			switch {
			case tc.want == nil && (r.err != nil || r.res.Text != "in"):
				t.Errorf("Invoke() = %q, %v; want the answer", r.res.Text, r.err)
			case tc.want != nil && !errors.Is(r.err, tc.want):
				t.Errorf("Invoke() error = %v, want %v", r.err, tc.want)
			}
		})
	}
}

// TestInitialize checks what the client declares: protocol version 1, and
// no file system and no terminal, so that the agent never asks for them.
func TestInitialize(t *testing.T) {
	t.Parallel()
	tr := filepath.Join(t.TempDir(), "transcript")
	if r := invoke(t, fakeagent.Script{Transcript: tr}, nil, invoker.Options{}, invoker.Request{}); r.err != nil {
		t.Fatalf("Invoke() error = %v", r.err)
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	var m struct {
		Method string `json:"method"`
		Params struct {
			ProtocolVersion    int `json:"protocolVersion"`
			ClientCapabilities struct {
				FS       map[string]bool `json:"fs"`
				Terminal *bool           `json:"terminal"`
			} `json:"clientCapabilities"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(first), &m); err != nil {
		t.Fatalf("first line %q: %v", first, err)
	}
	c := m.Params.ClientCapabilities
	if m.Method != "initialize" || m.Params.ProtocolVersion != 1 || c.Terminal == nil || *c.Terminal ||
		len(c.FS) != 2 || c.FS["readTextFile"] || c.FS["writeTextFile"] {
		t.Errorf("first line = %s, want initialize of version 1 with fs.readTextFile, fs.writeTextFile and terminal false", first)
	}
}

// TestCancelIgnored checks that an agent that ignores session/cancel is
// stopped with the ladder, and the session closed.
func TestCancelIgnored(t *testing.T) {
	t.Parallel()
	s := fakeagent.Script{StreamFor: time.Hour, IgnoreInterrupt: true, Grandchild: true, Escapee: true, Tag: fakeagent.NewTag()}
	sess, err := acp.New(fakeAgent(s), quick, invoker.Options{TurnInterruptGrace: 200 * time.Millisecond}).OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = sess.Turn(ctx, invoker.TurnRequest{Prompt: "x", OnEvent: func(invoker.Event) { cancel() }})
	if !errors.Is(err, invoker.ErrInterruptIgnored) || !errors.Is(err, invoker.ErrSessionClosed) || !errors.Is(err, context.Canceled) {
		t.Errorf("Turn() error = %v, want ErrInterruptIgnored, ErrSessionClosed and context.Canceled", err)
	}
	sess.Close()
	assertGone(t, s.Tag)
}
