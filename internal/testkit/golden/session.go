package golden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// CaptureWorkdir is the workdir of every session capture: e2e's
// TestCaptureSessions writes it for the run's own, so that a replay gives
// the protocol the same Request.Workdir and its lines match byte for byte.
const CaptureWorkdir = "/capture/workdir"

// A CaptureLine is one line of a session capture, in the order the proxy
// between the engine and the CLI saw it.
type CaptureLine struct {
	// Dir is '>' for a line the session wrote on the CLI's standard
	// input, '<' for a line of its standard output and '!' for one of
	// its standard error.
	Dir  byte
	Text []byte
}

// LoadSession reads testdata/session/name, a capture recorded by e2e's
// TestCaptureSessions: "# " lines are comments, every other line is its
// direction, a space and the line.
func LoadSession(t testing.TB, name string) []CaptureLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "session", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []CaptureLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Bytes()
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		if len(l) < 2 || l[1] != ' ' || !strings.ContainsRune("<>!", rune(l[0])) {
			t.Fatalf("%s:%d: %.40q is not a capture line", name, n, l)
		}
		out = append(out, CaptureLine{Dir: l[0], Text: bytes.Clone(l[2:])})
	}
	return out
}

// A SessionTurn is one turn the capture's session was given.
type SessionTurn struct {
	Prompt string
	// Interrupted: the turn was cancelled, so the session sent the
	// CLI's interrupt request.
	Interrupted bool
}

// A TurnSummary is what a golden session summary holds of one turn: its
// events without Raw, where the turn ended, and the outcome.
type TurnSummary struct {
	Prompt string          `json:"prompt"`
	Events []invoker.Event `json:"events"`
	// EndedAt is the capture's stdout line, counted from 1, whose Step
	// reported TurnEnded.
	EndedAt int `json:"ended_at"`
	Outcome struct {
		SessionID string        `json:"session_id"`
		Text      string        `json:"text"`
		Usage     invoker.Usage `json:"usage"`
		Success   bool          `json:"success"`
		Err       string        `json:"err,omitempty"`
	} `json:"outcome"`
	err error
}

// A SessionSummary is the golden summary of one replayed session.
type SessionSummary struct {
	// Opening holds the events decoded before the first turn.
	Opening []invoker.Event `json:"opening"`
	// ReadyAt is the stdout line, counted from 1, whose Step reported
	// the session ready (0: ready at Open).
	ReadyAt int           `json:"ready_at"`
	Turns   []TurnSummary `json:"turns"`
}

// ReplaySession drives p through a capture as the engine drove the real
// CLI: Open, then each stdout line to Decode and each stderr line to
// Stderr, in the captured order; at a stdin line that no earlier call
// produced, the next of turns starts (StartTurn) or, if it is
// interrupted and running, is interrupted (Interrupt). Every line p
// produces must be the captured stdin line, byte for byte and in order:
// the real CLI answered exactly those. The turns must each end once
// (Step.TurnEnded, after which Outcome is taken) and nothing may be left
// to write at the end. Failures are reported through t.Errorf.
func ReplaySession(t testing.TB, p driver.SessionProtocol, capture []CaptureLine, turns []SessionTurn) SessionSummary {
	t.Helper()
	var sum SessionSummary
	pending, ready := p.Open()
	inTurn := false
	var actions []func() [][]byte
	for _, turn := range turns {
		actions = append(actions, func() [][]byte {
			if !ready {
				t.Errorf("turn %q started before the session was ready", turn.Prompt)
			}
			lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: turn.Prompt})
			if err != nil {
				t.Errorf("StartTurn(%q) error = %v", turn.Prompt, err)
			}
			sum.Turns = append(sum.Turns, TurnSummary{Prompt: turn.Prompt, Events: []invoker.Event{}})
			inTurn = true
			return lines
		})
		if turn.Interrupted {
			actions = append(actions, func() [][]byte { return p.Interrupt() })
		}
	}
	stdout := 0
	for i, l := range capture {
		switch l.Dir {
		case '>':
			for len(pending) == 0 && len(actions) > 0 {
				next := actions[0]
				actions = actions[1:]
				pending = append(pending, next()...)
			}
			if len(pending) == 0 {
				t.Errorf("capture line %d: the session wrote %.200s, which the protocol did not produce", i+1, l.Text)
				continue
			}
			if !bytes.Equal(pending[0], l.Text) {
				t.Errorf("capture line %d: the protocol writes\n\t%s\nwhere the captured session wrote\n\t%s", i+1, pending[0], l.Text)
			}
			pending = pending[1:]
		case '<':
			stdout++
			st, err := p.Decode(l.Text)
			if err != nil {
				t.Errorf("Decode(stdout line %d: %.120s) error = %v, want nil", stdout, l.Text, err)
			}
			pending = append(pending, st.Write...)
			if st.Ready {
				if ready && sum.ReadyAt != 0 {
					t.Errorf("stdout line %d: ready again (first at line %d)", stdout, sum.ReadyAt)
				}
				ready, sum.ReadyAt = true, stdout
			}
			evs := make([]invoker.Event, 0, len(st.Events))
			for _, ev := range st.Events {
				if _, err := json.Marshal(ev); err != nil {
					t.Errorf("json.Marshal(event of stdout line %d) = %v", stdout, err)
				}
				ev.Raw = nil
				evs = append(evs, ev)
			}
			if !inTurn {
				if len(sum.Turns) > 0 && len(evs) > 0 {
					t.Errorf("stdout line %d: events %v between turns", stdout, Kinds(evs))
				}
				sum.Opening = append(sum.Opening, evs...)
			} else {
				cur := &sum.Turns[len(sum.Turns)-1]
				cur.Events = append(cur.Events, evs...)
			}
			if st.TurnEnded {
				if !inTurn {
					t.Errorf("stdout line %d ended a turn while none was running", stdout)
					continue
				}
				cur := &sum.Turns[len(sum.Turns)-1]
				cur.EndedAt = stdout
				out := p.Outcome("")
				cur.Outcome.SessionID, cur.Outcome.Text, cur.Outcome.Usage, cur.Outcome.Success = out.SessionID, out.Text, out.Usage, out.Success
				if out.Err != nil {
					cur.Outcome.Err, cur.err = out.Err.Error(), out.Err
				}
				inTurn = false
			}
		case '!':
			if err := p.Stderr(l.Text); err != nil {
				t.Errorf("Stderr(%q) = %v, want nil for the CLI's normal noise", l.Text, err)
			}
		}
	}
	if len(actions) > 0 {
		t.Errorf("%d of the turns' calls were never made: the capture holds fewer stdin lines than the turns need", len(actions))
	}
	if len(pending) > 0 {
		t.Errorf("the protocol produced lines the captured session never wrote: %q", pending)
	}
	for _, turn := range sum.Turns {
		if turn.EndedAt == 0 {
			t.Errorf("turn %q never ended", turn.Prompt)
		}
	}
	return sum
}

// A TurnWant is what one replayed turn must end with.
type TurnWant struct {
	SessionTurn
	// Text is the outcome's text, whole.
	Text    string
	Success bool
}

// Turn is the want of a turn that ended by itself, with text, and
// successfully when ok.
func Turn(prompt, text string, ok bool) TurnWant {
	return TurnWant{SessionTurn: SessionTurn{Prompt: prompt}, Text: text, Success: ok}
}

// Interrupted is the want of a turn that was interrupted, with the
// partial text.
func Interrupted(prompt, text string) TurnWant {
	return TurnWant{SessionTurn: SessionTurn{Prompt: prompt, Interrupted: true}, Text: text}
}

// A SessionWant is what one capture in testdata/session must replay to.
type SessionWant struct {
	// File is the capture's name in testdata/session.
	File string
	// Request is what the session was opened with (Workdir is set to
	// CaptureWorkdir).
	Request invoker.SessionRequest
	// SessionID is every turn's outcome's, and that of the opening's
	// session event when the protocol reports one before the first turn.
	SessionID string
	Turns     []TurnWant
}

// SessionCaptures replays each capture of wants through a fresh protocol
// from newProtocol, checks every turn's outcome and the golden summary
// (testdata/session/<file>.golden, rewritten with -update), and fails for
// any capture in testdata/session that no want covers.
func SessionCaptures(t *testing.T, newProtocol func(*invoker.SessionRequest) driver.SessionProtocol, wants []SessionWant) {
	t.Helper()
	seen := map[string]bool{}
	for _, w := range wants {
		seen[w.File] = true
		t.Run(w.File, func(t *testing.T) {
			req := w.Request
			req.Workdir = CaptureWorkdir
			var turns []SessionTurn
			for _, tw := range w.Turns {
				turns = append(turns, tw.SessionTurn)
			}
			sum := ReplaySession(t, newProtocol(&req), LoadSession(t, w.File), turns)
			for _, ev := range sum.Opening {
				if ev.Kind == invoker.KindSession && ev.SessionID != w.SessionID {
					t.Errorf("opening: session event %q, want %q", ev.SessionID, w.SessionID)
				}
			}
			if len(sum.Turns) != len(w.Turns) {
				t.Fatalf("replayed %d turns, want %d", len(sum.Turns), len(w.Turns))
			}
			for i, tw := range w.Turns {
				got := sum.Turns[i]
				o := got.Outcome
				if o.SessionID != w.SessionID || o.Text != tw.Text || o.Success != tw.Success {
					t.Errorf("turn %d (%q): outcome {session %q, text %q, success %v}, want {%q, %q, %v}",
						i+1, tw.Prompt, o.SessionID, o.Text, o.Success, w.SessionID, tw.Text, tw.Success)
				}
				if tw.Success && got.err != nil {
					t.Errorf("turn %d: outcome error = %v, want nil on success", i+1, got.err)
				}
				if !tw.Success && got.err == nil {
					t.Errorf("turn %d: outcome has no error, want the turn's failure", i+1)
				}
				if tw.Interrupted && (errors.Is(got.err, invoker.ErrAuthRequired) || errors.Is(got.err, invoker.ErrRateLimited)) {
					t.Errorf("turn %d: interrupted turn's error = %v, want no auth or rate-limit sentinel", i+1, got.err)
				}
				if n := len(got.Events); n == 0 || got.Events[n-1].Kind != invoker.KindDone {
					t.Errorf("turn %d: events %v, want them to end with %v", i+1, Kinds(got.Events), invoker.KindDone)
				}
			}
			b, err := json.MarshalIndent(sum, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join("testdata", "session", w.File+".golden"), append(b, '\n'))
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "session", "*.jsonl"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("session capture %s has no test case", f)
		}
	}
}

// checkFile compares got with the file at path, or rewrites it with
// -update.
func checkFile(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("replayed %s differs from it:\n%s", path, got)
	}
}
