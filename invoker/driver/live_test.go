package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// echoBackend is a session backend whose "CLI" is cat: every line the
// protocol writes comes back, and its decoder reads the echo as what the
// CLI said. The engine's handling of live turns (deltas, steering,
// switches, rate limits, a run routed to a session) is then tested line by
// line, with the real process machinery and no scripted agent.
type echoBackend struct {
	caps invoker.Capabilities
}

var (
	_ driver.SessionBackend = echoBackend{}
	_ driver.SessionRouter  = echoBackend{}
)

func (echoBackend) Name() string                         { return "echo" }
func (echoBackend) Binary() string                       { return "cat" }
func (echoBackend) InstallHint() string                  { return "apt-get install coreutils" }
func (b echoBackend) Capabilities() invoker.Capabilities { return b.caps }
func (echoBackend) Hint(field string) string             { return "the echo CLI has no " + field }

// Command is the one-shot mode: it can only answer whole messages.
func (echoBackend) Command(req *invoker.Request) (*driver.Command, error) {
	return &driver.Command{Stdin: echoLine("msg", req.Prompt) + echoLine("end", "")}, nil
}

func (echoBackend) NewDecoder(*invoker.Request) driver.Decoder { return &echoDecoder{} }

func (echoBackend) SessionCommand(*invoker.SessionRequest) (*driver.Command, error) {
	return &driver.Command{}, nil
}

func (echoBackend) NewSessionProtocol(req *invoker.SessionRequest) driver.SessionProtocol {
	return &echoProtocol{model: req.Model, perm: req.Permission}
}

// InSession routes the requests the one-shot mode cannot honour.
func (echoBackend) InSession(req *invoker.Request) bool { return req.Deltas || req.Fork }

// echoLine is one line of the echo protocol.
func echoLine(typ, text string) string {
	b, _ := json.Marshal(map[string]string{"t": typ, "text": text})
	return string(b) + "\n"
}

// echoDecoder decodes echoed lines into events: "delta" a KindDelta, "msg"
// a whole message, "steer" and "switch" KindRaw, "429" a rate-limited
// failure, "end" the turn's end.
type echoDecoder struct {
	text, session string
	done          bool
	err           error
	resets        time.Time
}

func (d *echoDecoder) Decode(line []byte) ([]invoker.Event, error) {
	var l struct{ T, Text string }
	if err := json.Unmarshal(line, &l); err != nil {
		return []invoker.Event{driver.Malformed(line, err)}, nil
	}
	ev := invoker.Event{Raw: line, Text: l.Text}
	switch l.T {
	case "session":
		d.session = l.Text
		ev.Kind, ev.SessionID, ev.Text = invoker.KindSession, l.Text, ""
	case "delta":
		ev.Kind, ev.Delta = invoker.KindDelta, invoker.KindMessage
	case "msg":
		d.text = l.Text
		ev.Kind = invoker.KindMessage
	case "429":
		at, _ := time.Parse(time.RFC3339, l.Text)
		d.resets = at
		d.err = &invoker.StreamError{Message: "429 Too Many Requests", Err: invoker.ErrRateLimited}
		ev.Kind, ev.RateLimit = invoker.KindRateLimit, &invoker.RateLimit{Limit: "requests", Status: "rejected", ResetsAt: at}
	case "end":
		d.done = d.err == nil
		ev.Kind = invoker.KindDone
	default:
		ev.Kind = invoker.KindRaw
	}
	return []invoker.Event{ev}, nil
}

func (d *echoDecoder) Stderr([]byte) error { return nil }

func (d *echoDecoder) Outcome(exitCode int, stderr string) driver.Outcome {
	return driver.Outcome{SessionID: d.session, Text: d.text, Success: d.done && exitCode == 0, Err: d.err, ResetsAt: d.resets}
}

// echoProtocol speaks the echo protocol for a session: a turn's prompt
// "stream A B C" streams its words as deltas, then the whole message;
// "wait" streams one delta and nothing more until steered; "429 TIME"
// fails rate limited.
type echoProtocol struct {
	echoDecoder
	model   string
	perm    invoker.Permission
	waiting bool
}

// Open sends the session line, whose echo is the handshake's answer: the
// session is ready when it comes back (over 64 KiB for the model "huge
// handshake").
func (p *echoProtocol) Open() ([][]byte, bool) {
	id := "echo-1"
	if p.model == "huge handshake" {
		id = strings.Repeat("x", 128<<10)
	}
	return [][]byte{[]byte(strings.TrimSpace(echoLine("session", id)))}, false
}

func (p *echoProtocol) StartTurn(t *invoker.TurnRequest) ([][]byte, error) {
	p.echoDecoder = echoDecoder{session: p.session}
	var out []string
	if t.Model != "" && t.Model != p.model {
		p.model = t.Model
		out = append(out, echoLine("switch", "model="+t.Model))
	}
	if t.Permission != "" && t.Permission != p.perm {
		p.perm = t.Permission
		out = append(out, echoLine("switch", "permission="+string(t.Permission)))
	}
	words := strings.Fields(t.Prompt)
	switch {
	case len(words) > 0 && words[0] == "stream":
		for _, w := range words[1:] {
			out = append(out, echoLine("delta", w+" "))
		}
		out = append(out, echoLine("msg", strings.Join(words[1:], " ")), echoLine("end", ""))
	case len(words) == 2 && words[0] == "429":
		out = append(out, echoLine("429", words[1]), echoLine("end", ""))
	case t.Prompt == "wait":
		p.waiting = true
		out = append(out, echoLine("delta", "waiting "))
	default:
		out = append(out, echoLine("msg", t.Prompt), echoLine("end", ""))
	}
	return lines(out), nil
}

// Steer answers a waiting turn with the steering text.
func (p *echoProtocol) Steer(prompt string) ([][]byte, error) {
	out := []string{echoLine("steer", prompt)}
	if p.waiting {
		p.waiting = false
		out = append(out, echoLine("msg", "steered: "+prompt), echoLine("end", ""))
	}
	return lines(out), nil
}

func (p *echoProtocol) Interrupt() [][]byte {
	return lines([]string{echoLine("msg", "interrupted"), echoLine("end", "")})
}

func (p *echoProtocol) Decode(line []byte) (driver.Step, error) {
	evs, err := p.echoDecoder.Decode(line)
	st := driver.Step{Events: evs}
	for _, ev := range evs {
		switch ev.Kind {
		case invoker.KindSession:
			st.Ready = true
		case invoker.KindDone:
			st.TurnEnded = true
		}
	}
	return st, err
}

func (p *echoProtocol) Outcome(stderr string) driver.Outcome { return p.echoDecoder.Outcome(0, stderr) }

func lines(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(strings.TrimSuffix(s, "\n"))
	}
	return out
}

// steerEcho is echoBackend whose CLI takes a message during a turn.
type steerEcho struct{ echoBackend }

var _ driver.Steerer = steerEcho{}

func (steerEcho) Steer(p driver.SessionProtocol, prompt string) ([][]byte, error) {
	return p.(*echoProtocol).Steer(prompt)
}

// allLive is every capability of live turns a Backend declares; live is
// the echo CLI with them, steering included.
var (
	allLive = invoker.Capabilities{Model: true, Deltas: true, Fork: true, Resume: true, SwitchModel: true, SwitchPermission: true}
	live    = steerEcho{echoBackend{caps: allLive}}
)

// kinds records the events of a turn.
type kinds struct {
	mu  sync.Mutex
	evs []invoker.Event
}

func (k *kinds) on(ev invoker.Event) {
	k.mu.Lock()
	k.evs = append(k.evs, ev)
	k.mu.Unlock()
}

func (k *kinds) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, ev := range k.evs {
		if ev.Kind == invoker.KindSession || ev.Kind == invoker.KindDone {
			continue
		}
		fmt.Fprintf(&b, "%s:%s|", ev.Kind, strings.TrimSpace(ev.Text))
	}
	return b.String()
}

func openEcho(t *testing.T, b driver.SessionBackend, req invoker.SessionRequest) invoker.Session {
	t.Helper()
	return openOn(t, driver.New(b, invoker.Options{Binary: "cat"}), req)
}

// openOn opens a session of inv, closed when the test ends.
func openOn(t *testing.T, inv invoker.Invoker, req invoker.SessionRequest) invoker.Session {
	t.Helper()
	if req.Workdir == "" {
		req.Workdir = t.TempDir()
	}
	s, err := inv.OpenSession(context.Background(), req)
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

// TestDeltasDeliveredOnlyWhenAsked: KindDelta events reach OnEvent only in
// a session or run that asked for them; the whole message comes either
// way, and Result.Text is the same.
func TestDeltasDeliveredOnlyWhenAsked(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		t.Run(fmt.Sprint("deltas=", deltas), func(t *testing.T) {
			s := openEcho(t, live, invoker.SessionRequest{Deltas: deltas})
			var k kinds
			res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "stream one two", OnEvent: k.on})
			if err != nil || res.Text != "one two" {
				t.Fatalf("Turn() = %q, %v; want one two", res.Text, err)
			}
			want := "message:one two|"
			if deltas {
				want = "delta:one|delta:two|" + want
			}
			if got := k.String(); got != want {
				t.Errorf("events = %s, want %s", got, want)
			}
		})
	}
}

// TestInvokeRoutedToSession: a request the one-shot mode cannot honour
// runs as a session of one turn, with its deltas, its session id and
// nothing left; others run one-shot.
func TestInvokeRoutedToSession(t *testing.T) {
	inv := driver.New(live, invoker.Options{Binary: "cat"})
	for _, tc := range []struct {
		deltas      bool
		want, wantS string
	}{
		{false, "message:stream one|", ""},
		{true, "delta:one|message:one|", "echo-1"},
	} {
		var k kinds
		res, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "stream one", Workdir: t.TempDir(), Deltas: tc.deltas, OnEvent: k.on})
		if err != nil {
			t.Fatalf("Invoke(Deltas: %v) error = %v", tc.deltas, err)
		}
		if got := k.String(); got != tc.want || res.SessionID != tc.wantS {
			t.Errorf("Invoke(Deltas: %v): events %s, session %q; want %s, %q", tc.deltas, got, res.SessionID, tc.want, tc.wantS)
		}
		if res.Containment == "" || res.Duration <= 0 {
			t.Errorf("Invoke(Deltas: %v): Result %+v, want its containment and duration", tc.deltas, res)
		}
	}
}

// TestSwitchesBetweenTurns: a turn's Model and Permission reach the
// protocol; a permission above the session's is refused before anything
// is sent, and a CLI without the capability refuses with ErrUnsupported.
func TestSwitchesBetweenTurns(t *testing.T) {
	s := openEcho(t, live, invoker.SessionRequest{Permission: invoker.WorkspaceWrite, Model: "m1"})
	var k kinds
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "a", Model: "m2", Permission: invoker.ReadOnly, OnEvent: k.on}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "b", Permission: invoker.WorkspaceWrite, OnEvent: k.on}); err != nil {
		t.Fatal(err)
	}
	if got, want := k.String(), "raw:model=m2|raw:permission=read-only|message:a|raw:permission=workspace-write|message:b|"; got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
	_, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "c", Permission: invoker.Unlimited})
	if !errors.Is(err, invoker.ErrInvalidRequest) || !strings.Contains(err.Error(), "ceiling") {
		t.Errorf("a turn above the ceiling: error = %v, want ErrInvalidRequest naming the ceiling", err)
	}
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "c", Permission: "root"}); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("an unknown permission: error = %v, want ErrInvalidRequest", err)
	}

	plain := openEcho(t, echoBackend{}, invoker.SessionRequest{Permission: invoker.Unlimited})
	for _, tr := range []invoker.TurnRequest{{Prompt: "x", Model: "m"}, {Prompt: "x", Permission: invoker.ReadOnly}} {
		if _, err := plain.Turn(context.Background(), tr); !errors.Is(err, invoker.ErrUnsupported) || !strings.Contains(err.Error(), "TurnRequest.") {
			t.Errorf("Turn(%+v) without the capability: error = %v, want ErrUnsupported naming the TurnRequest field", tr, err)
		}
	}
	if err := plain.Steer(context.Background(), "x"); !errors.Is(err, invoker.ErrUnsupported) {
		t.Errorf("Steer() without the capability: error = %v, want ErrUnsupported", err)
	}
}

// TestSteer: a steer reaches the running turn, which goes on to end with
// it; without a turn in progress Steer is an invalid request.
func TestSteer(t *testing.T) {
	s := openEcho(t, live, invoker.SessionRequest{Deltas: true})
	if err := s.Steer(context.Background(), "now"); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("Steer() between turns: error = %v, want ErrInvalidRequest", err)
	}
	if err := s.Steer(context.Background(), ""); !errors.Is(err, invoker.ErrInvalidRequest) {
		t.Errorf("Steer(\"\"): error = %v, want ErrInvalidRequest", err)
	}
	var k kinds
	started, done := waitTurn(context.Background(), s, &k)
	<-started
	if err := s.Steer(context.Background(), "this way"); err != nil {
		t.Fatalf("Steer() during the turn = %v", err)
	}
	if end := <-done; end.err != nil || end.text != "steered: this way" {
		t.Fatalf("steered Turn() = %q, %v; want the steered answer", end.text, end.err)
	}
	if got, want := k.String(), "delta:waiting|raw:this way|message:steered: this way|"; got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

// turnEnd is what a turn returned.
type turnEnd struct {
	text string
	err  error
}

// waitTurn runs the turn "wait" of s on a goroutine of its own, its events
// recorded in k: started is closed at its first delta, and done gets what
// it returned.
func waitTurn(ctx context.Context, s invoker.Session, k *kinds) (started <-chan struct{}, done <-chan turnEnd) {
	first, end := make(chan struct{}), make(chan turnEnd, 1)
	var once sync.Once
	go func() {
		res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "wait", OnEvent: func(ev invoker.Event) {
			k.on(ev)
			if ev.Kind == invoker.KindDelta {
				once.Do(func() { close(first) })
			}
		}})
		end <- turnEnd{res.Text, err}
	}()
	return first, end
}

// TestRateLimitedTurn: a turn the CLI failed rate limited is a
// *LimitError matching ErrRateLimited, with the session and when the limit
// resets, and still the CLI's own error.
func TestRateLimitedTurn(t *testing.T) {
	s := openEcho(t, live, invoker.SessionRequest{})
	reset := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	var k kinds
	_, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "429 " + reset.Format(time.RFC3339), OnEvent: k.on})
	var le *invoker.LimitError
	var se *invoker.StreamError
	if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) || !errors.As(err, &se) {
		t.Fatalf("error = %v, want a *LimitError matching ErrRateLimited wrapping the *StreamError", err)
	}
	if !le.ResetsAt.Equal(reset) || le.SessionID != "echo-1" || !strings.Contains(err.Error(), "resets at 2026-11-27T03:00:00Z") {
		t.Errorf("LimitError = %+v (%v), want ResetsAt %v and session echo-1 in it", le, err, reset)
	}
	if !strings.HasPrefix(k.String(), "rate_limit:") {
		t.Errorf("events = %s, want the rate-limit event first", k.String())
	}
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "after"}); err != nil {
		t.Errorf("the session after a rate-limited turn: %v, want it usable", err)
	}
}

// TestForkNeedsSessionID: Fork names the conversation it copies.
func TestForkNeedsSessionID(t *testing.T) {
	inv := driver.New(live, invoker.Options{Binary: "cat"})
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "x", Workdir: t.TempDir(), Fork: true})
	if !errors.Is(err, invoker.ErrInvalidRequest) || !strings.Contains(err.Error(), "SessionID") {
		t.Errorf("Invoke(Fork without SessionID) error = %v, want ErrInvalidRequest naming SessionID", err)
	}
	_, err = driver.New(echoBackend{caps: invoker.Capabilities{Resume: true}}, invoker.Options{Binary: "cat"}).
		Invoke(context.Background(), invoker.Request{Prompt: "x", Workdir: t.TempDir(), Fork: true, SessionID: "s"})
	if !errors.Is(err, invoker.ErrUnsupported) {
		t.Errorf("Invoke(Fork) on a CLI without forks: error = %v, want ErrUnsupported", err)
	}
}

// A line over the limit in the session's opening fails OpenSession at
// once with ErrLineTooLong (here the handshake's answer, without which the
// session was never ready), and leaves nothing running.
func TestLineOverLimitInHandshake(t *testing.T) {
	inv := driver.New(live, invoker.Options{Binary: "cat", MaxLineSize: 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	s, err := inv.OpenSession(ctx, invoker.SessionRequest{Workdir: t.TempDir(), Model: "huge handshake"})
	if s != nil || !errors.Is(err, invoker.ErrLineTooLong) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OpenSession() = %v, %v; want nil and ErrLineTooLong at once", s, err)
	}
}

// A Turn or a Steer whose context is already cancelled sends nothing and
// says why as Invoke does: the error matches context.Canceled and names
// the cancel's cause, which it does not match.
func TestCancelledBeforeStartNamesTheCause(t *testing.T) {
	s := openEcho(t, live, invoker.SessionRequest{})
	cause := errors.New("the user went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	_, turnErr := s.Turn(ctx, invoker.TurnRequest{Prompt: "x"})
	steerErr := s.Steer(ctx, "x")
	_, invokeErr := driver.New(live, invoker.Options{Binary: "cat"}).Invoke(ctx, invoker.Request{Prompt: "x", Workdir: t.TempDir()})
	for _, c := range []struct {
		call string
		err  error
	}{{"Turn", turnErr}, {"Steer", steerErr}, {"Invoke", invokeErr}} {
		if !errors.Is(c.err, context.Canceled) || errors.Is(c.err, cause) || !strings.Contains(fmt.Sprint(c.err), cause.Error()) {
			t.Errorf("%s() error = %v, want context.Canceled naming the cause %q", c.call, c.err, cause)
		}
	}
	if res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "after"}); err != nil || res.Text != "after" {
		t.Errorf("Turn() after = %+v, %v; want the session to go on", res, err)
	}
}

// stderrAtEOF is the echo CLI as a shell loop that writes to its standard
// error once its input ends: at Close.
type stderrAtEOF struct{ echoBackend }

func (stderrAtEOF) SessionCommand(*invoker.SessionRequest) (*driver.Command, error) {
	return &driver.Command{Args: []string{"-c", `while IFS= read -r l; do printf '%s\n' "$l"; done; echo "said at the end" >&2`}}, nil
}

// A run of Invoke carried by a session reports the stderr tail of the
// whole run, as a one-shot run does: what the CLI wrote up to its exit,
// after the end of the turn too.
func TestRoutedInvokeKeepsTheWholeStderr(t *testing.T) {
	inv := driver.New(stderrAtEOF{echoBackend{caps: allLive}}, invoker.Options{Binary: "/bin/sh"})
	res, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Deltas: true})
	if err != nil || res.Text != "hi" {
		t.Fatalf("Invoke() = %+v, %v; want the answer", res, err)
	}
	if !strings.Contains(res.Stderr, "said at the end") {
		t.Errorf("Result.Stderr = %q, want what the CLI wrote before it exited", res.Stderr)
	}
}

// A pause is a hook of the engine's that, called once, says so (reached)
// and waits until the test closes resume.
type pause struct{ reached, resume chan struct{} }

func newPause() pause { return pause{make(chan struct{}), make(chan struct{})} }

func (p pause) hook() {
	close(p.reached)
	<-p.resume
}

// TestSteerWaitsForThePrompt: a steer that comes once the turn is the
// session's current one, before its prompt was written, reaches the CLI
// after the prompt: the echoed lines come back in the order they were
// written, the prompt's first.
func TestSteerWaitsForThePrompt(t *testing.T) {
	published := newPause()
	s := openOn(t, driver.OnTurnPublished(driver.New(live, invoker.Options{Binary: "cat"}), published.hook), invoker.SessionRequest{Deltas: true})
	var k kinds
	_, done := waitTurn(context.Background(), s, &k)
	<-published.reached
	steerErr := s.Steer(context.Background(), "early")
	close(published.resume)
	if steerErr != nil {
		t.Fatalf("Steer() once the turn is published = %v", steerErr)
	}
	if end := <-done; end.err != nil || end.text != "steered: early" {
		t.Fatalf("steered Turn() = %q, %v; want the steered answer", end.text, end.err)
	}
	if got, want := k.String(), "delta:waiting|raw:early|message:steered: early|"; got != want {
		t.Errorf("events = %s, want %s (the prompt's lines first)", got, want)
	}
}

// TestSteerBeforeInterrupt: a steer the protocol made before the turn was
// interrupted reaches the CLI before the interrupt, in the order the
// protocol made them: here the CLI answers the steer and ends the turn,
// and the interrupt comes after.
func TestSteerBeforeInterrupt(t *testing.T) {
	steered := newPause()
	s := openOn(t, driver.OnSteered(driver.New(live, invoker.Options{Binary: "cat"}), steered.hook), invoker.SessionRequest{Deltas: true})
	var k kinds
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, done := waitTurn(ctx, s, &k)
	<-started
	steerErr := make(chan error, 1)
	go func() { steerErr <- s.Steer(context.Background(), "early") }()
	<-steered.reached
	cancel()
	<-done
	close(steered.resume)
	if err := <-steerErr; err != nil {
		t.Fatalf("Steer() = %v", err)
	}
	if got, want := k.String(), "delta:waiting|raw:early|message:steered: early|"; got != want {
		t.Errorf("events = %s, want %s (the steer's lines before the interrupt's)", got, want)
	}
}

// TestSteerAfterInterrupt: once the CLI was asked to end the turn, a
// steer is refused (ErrInvalidRequest) rather than queued after the
// interrupt, where it would reach a turn that is ending. The steer is
// made while the turn is still the session's current one: from the
// event of the interrupt's echo, before its end is read.
func TestSteerAfterInterrupt(t *testing.T) {
	s := openEcho(t, live, invoker.SessionRequest{Deltas: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steerErr := make(chan error, 1)
	var k kinds
	// The echo CLI ends an interrupted turn as a finished one: the
	// turn's own error is not what this test is about.
	_, _ = s.Turn(ctx, invoker.TurnRequest{Prompt: "wait", OnEvent: func(ev invoker.Event) {
		k.on(ev)
		switch {
		case ev.Kind == invoker.KindDelta:
			cancel()
			// The turn's context is done; its interrupt may not be
			// written yet: the steer is refused already.
			if err := s.Steer(context.Background(), "early"); !errors.Is(err, invoker.ErrInvalidRequest) {
				t.Errorf("Steer() once the turn's context is done = %v, want ErrInvalidRequest", err)
			}
		case ev.Kind == invoker.KindMessage && ev.Text == "interrupted":
			steerErr <- s.Steer(context.Background(), "late")
		}
	}})
	select {
	case err := <-steerErr:
		if !errors.Is(err, invoker.ErrInvalidRequest) || !strings.Contains(err.Error(), "being interrupted") {
			t.Errorf("Steer() during the interrupt = %v, want ErrInvalidRequest saying the turn is being interrupted", err)
		}
	default:
		t.Fatalf("the interrupt's echo never came: events %s", k.String())
	}
	if strings.Contains(k.String(), "late") || strings.Contains(k.String(), "early") {
		t.Errorf("events = %s: a refused steer reached the CLI", k.String())
	}
}
