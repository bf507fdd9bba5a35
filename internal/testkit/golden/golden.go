// Package golden runs the backends' decoders over captures of the real
// CLIs (testdata/*.stdout, *.stderr, *.meta and the older *.json) and
// compares what they decode with golden summaries, rewritten with -update.
package golden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the decoder's output")

// A Sample is one captured run of the real CLI: its stdout lines, stderr
// and exit status.
type Sample struct {
	Lines    [][]byte
	Stderr   string
	ExitCode int
}

// Load reads testdata/name: a .stdout capture (with .stderr and .meta
// beside it when present) or a 2025 .json capture holding the events, the
// return code and stderr.
func Load(t testing.TB, name string) Sample {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var s Sample
	if strings.HasSuffix(name, ".json") {
		var rec struct {
			ReturnCode int               `json:"returncode"`
			Events     []json.RawMessage `json:"events"`
			Stderr     string            `json:"stderr"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		for _, ev := range rec.Events {
			var b bytes.Buffer
			if err := json.Compact(&b, ev); err != nil {
				t.Fatal(err)
			}
			s.Lines = append(s.Lines, b.Bytes())
		}
		s.Stderr, s.ExitCode = rec.Stderr, rec.ReturnCode
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			s.Lines = append(s.Lines, bytes.Clone(sc.Bytes()))
		}
	}
	base := strings.TrimSuffix(name, ".stdout")
	if b, err := os.ReadFile(filepath.Join("testdata", base+".stderr")); err == nil {
		s.Stderr = string(b)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", base+".meta")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "rc="); ok {
				s.ExitCode, _ = strconv.Atoi(v)
			}
		}
	}
	return s
}

// A Summary is what a golden file holds: the events without Raw, and the
// outcome.
type Summary struct {
	Events  []invoker.Event `json:"events"`
	Outcome struct {
		SessionID string        `json:"session_id"`
		Text      string        `json:"text"`
		Usage     invoker.Usage `json:"usage"`
		Success   bool          `json:"success"`
		Err       string        `json:"err,omitempty"`
		// Turns and Structured are left out when zero, so that the
		// summaries of CLIs that report neither did not change when
		// they were added.
		Turns      int             `json:"turns,omitempty"`
		Structured json.RawMessage `json:"structured,omitempty"`
	} `json:"outcome"`
}

// Run decodes a sample with d like the engine does and checks the
// invariants every line must keep: no fatal error, at least one event for
// a line that is not JSON (a JSON line may carry nothing), Raw kept, events that marshal, and no fatal signature in normal stderr.
func Run(t testing.TB, d driver.Decoder, s Sample) (Summary, driver.Outcome) {
	t.Helper()
	var sum Summary
	for _, l := range s.Lines {
		evs, err := d.Decode(l)
		if err != nil {
			t.Errorf("Decode(%.80s) error = %v, want nil", l, err)
		}
		if len(evs) == 0 && !json.Valid(l) {
			t.Errorf("Decode(%.80s) returned no events; a line that is not JSON yields at least a warning", l)
		}
		for _, ev := range evs {
			if json.Valid(l) && !bytes.Equal(ev.Raw, l) {
				t.Errorf("event %v: Raw = %.80s, want the line", ev.Kind, ev.Raw)
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Errorf("json.Marshal(event) = %v", err)
			}
			ev.Raw = nil
			sum.Events = append(sum.Events, ev)
		}
	}
	for l := range strings.Lines(s.Stderr) {
		if err := d.Stderr([]byte(strings.TrimRight(l, "\n"))); err != nil {
			t.Errorf("Stderr(%q) = %v, want nil for normal noise", l, err)
		}
	}
	out := d.Outcome(s.ExitCode, s.Stderr)
	sum.Outcome.SessionID, sum.Outcome.Text, sum.Outcome.Usage, sum.Outcome.Success = out.SessionID, out.Text, out.Usage, out.Success
	if out.Err != nil {
		sum.Outcome.Err = out.Err.Error()
	}
	sum.Outcome.Turns, sum.Outcome.Structured = out.Turns, out.Structured
	return sum, out
}

// Check compares sum with testdata/<file>.golden, or rewrites it with
// -update.
func Check(t testing.TB, file string, sum Summary) {
	t.Helper()
	got, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", file+".golden")
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
		t.Errorf("decoded %s differs from %s:\n%s", file, path, got)
	}
}

// DecodeAll decodes lines with d and returns all their events; a fatal
// error fails the test.
func DecodeAll(t testing.TB, d driver.Decoder, lines ...string) []invoker.Event {
	t.Helper()
	var all []invoker.Event
	for _, l := range lines {
		evs, err := d.Decode([]byte(l))
		if err != nil {
			t.Fatalf("Decode(%s) error = %v", l, err)
		}
		all = append(all, evs...)
	}
	return all
}

// Kinds returns the kinds of evs, in order.
func Kinds(evs []invoker.Event) []invoker.EventKind {
	var ks []invoker.EventKind
	for _, ev := range evs {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// Fuzz fuzzes fresh decoders from newDecoder with single lines, seeded with
// every line of testdata/*.stdout and with extra. A decoder must never
// panic, must return at least one event for a line that is not blank and
// not valid JSON (a valid line may carry nothing), and
// its events must always marshal; it may return a fatal error only for a
// line fatalOK accepts (nil accepts none).
func Fuzz(f *testing.F, newDecoder func() driver.Decoder, fatalOK func(line []byte) bool, extra ...string) {
	files, _ := filepath.Glob("testdata/*.stdout")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			f.Add(bytes.Clone(sc.Bytes()))
		}
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDecoder()
		for range 2 { // twice: state from the first call must not break the second
			evs, err := d.Decode(bytes.Clone(line))
			if err != nil {
				if fatalOK == nil || !fatalOK(line) {
					t.Fatalf("Decode error = %v", err)
				}
				return
			}
			if len(evs) == 0 && len(bytes.TrimSpace(line)) > 0 && !json.Valid(line) {
				// A well-formed line may carry nothing (Codex's
				// turn.started); anything else is at least a warning.
				t.Fatalf("no event for %q", line)
			}
			for _, ev := range evs {
				if _, err := json.Marshal(ev); err != nil {
					t.Fatalf("json.Marshal(%+v) = %v", ev, err)
				}
			}
		}
		_ = d.Stderr(line)
		_ = d.Outcome(1, string(line))
	})
}

// BenchmarkDecode decodes every captured stream in testdata/*.stdout, each
// with a fresh decoder from newDecoder, and reports the throughput in MB/s.
func BenchmarkDecode(b *testing.B, newDecoder func() driver.Decoder) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.stdout"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no captured streams: %v", err)
	}
	var streams [][][]byte
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		size += int64(len(data))
		var lines [][]byte
		for line := range bytes.Lines(data) {
			if line = bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(line)) > 0 {
				lines = append(lines, line)
			}
		}
		streams = append(streams, lines)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, lines := range streams {
			d := newDecoder()
			for _, line := range lines {
				// The decoder may keep line as Raw but never writes to
				// it, so the lines serve every iteration. An error (a
				// fatal signature) is part of some samples.
				d.Decode(line)
			}
			d.Outcome(0, "")
		}
	}
}

// A Want is what one capture in testdata must decode to.
type Want struct {
	// File is the capture's name in testdata.
	File string
	// ExitCode, when not zero, replaces the capture's exit status (for
	// captures that did not record one).
	ExitCode int
	// SessionID and Text are the Outcome's; Text is checked whole unless
	// TextPrefix is set, in which case the text must start with it.
	SessionID, Text, TextPrefix string
	// Usage is checked when not zero.
	Usage invoker.Usage
	// Success is the Outcome's.
	Success bool
	// ErrIs is a sentinel the Outcome's error must match; with ErrIs nil
	// the error must match neither ErrAuthRequired nor ErrRateLimited.
	ErrIs error
	// StreamErr, when set, is the message of the *invoker.StreamError the
	// Outcome must carry, of type ErrType and with the capture's exit
	// status.
	StreamErr, ErrType string
	// ExitErr, when set, must be in the explanation of the
	// *invoker.ExitError the Outcome carries.
	ExitErr string
	// Limit, when set, is the Limit of the *invoker.LimitError the
	// Outcome's error must be, with the Outcome's session id.
	Limit string
	// Turns, when not zero, is the Outcome's Turns (the golden summary
	// holds it in any case).
	Turns int
	// Structured is the Outcome's Structured, as text.
	Structured string
}

// Samples decodes each capture of wants with a fresh decoder from
// newDecoder, checks the outcome and the golden summary, and fails for any
// capture in testdata that no Want covers.
func Samples(t *testing.T, newDecoder func() driver.Decoder, wants []Want) {
	t.Helper()
	seen := map[string]bool{}
	for _, w := range wants {
		seen[w.File] = true
		t.Run(w.File, func(t *testing.T) {
			s := Load(t, w.File)
			if w.ExitCode != 0 {
				s.ExitCode = w.ExitCode
			}
			sum, out := Run(t, newDecoder(), s)
			checkOutcome(t, w, s, out)
			Check(t, w.File, sum)
		})
	}
	files, _ := filepath.Glob("testdata/*")
	for _, f := range files {
		name := filepath.Base(f)
		if (strings.HasSuffix(name, ".stdout") || strings.HasSuffix(name, ".json")) && !seen[name] {
			t.Errorf("sample %s has no test case", name)
		}
	}
}

func checkOutcome(t *testing.T, w Want, s Sample, out driver.Outcome) {
	t.Helper()
	if out.SessionID != w.SessionID {
		t.Errorf("SessionID = %q, want %q", out.SessionID, w.SessionID)
	}
	if w.TextPrefix == "" && out.Text != w.Text {
		t.Errorf("Text = %q, want %q", out.Text, w.Text)
	}
	if !strings.HasPrefix(out.Text, w.TextPrefix) {
		t.Errorf("Text = %.120q, want it to start with %.120q", out.Text, w.TextPrefix)
	}
	if w.Usage != (invoker.Usage{}) && out.Usage != w.Usage {
		t.Errorf("Usage = %+v, want %+v", out.Usage, w.Usage)
	}
	if out.Success != w.Success {
		t.Errorf("Success = %v, want %v", out.Success, w.Success)
	}
	if w.Success && out.Err != nil {
		t.Errorf("Err = %v, want nil on success", out.Err)
	}
	if w.StreamErr != "" {
		var se *invoker.StreamError
		if !errors.As(out.Err, &se) {
			t.Fatalf("Err = %v, want a *StreamError", out.Err)
		}
		if se.Message != w.StreamErr || se.Type != w.ErrType {
			t.Errorf("StreamError = %q (%s), want %q (%s)", se.Message, se.Type, w.StreamErr, w.ErrType)
		}
	}
	if w.ExitErr != "" {
		var ee *invoker.ExitError
		if !errors.As(out.Err, &ee) || !strings.Contains(ee.Explanation, w.ExitErr) {
			t.Errorf("Err = %v, want an *ExitError explaining %q", out.Err, w.ExitErr)
		}
	}
	var le *invoker.LimitError
	switch isLimit := errors.As(out.Err, &le); {
	case w.Limit == "" && isLimit:
		t.Errorf("Err = %v, want no *LimitError", out.Err)
	case w.Limit != "" && !isLimit:
		t.Errorf("Err = %v, want a *LimitError", out.Err)
	case w.Limit != "" && (le.Limit != limits[w.Limit] || le.SessionID != out.SessionID):
		t.Errorf("LimitError = {Limit %v, SessionID %q}, want {%s, %q}", le.Limit, le.SessionID, w.Limit, out.SessionID)
	}
	if w.Turns != 0 && out.Turns != w.Turns {
		t.Errorf("Turns = %d, want %d", out.Turns, w.Turns)
	}
	if string(out.Structured) != w.Structured {
		t.Errorf("Structured = %s, want %s", out.Structured, w.Structured)
	}
	if w.ErrIs != nil && !errors.Is(out.Err, w.ErrIs) {
		t.Errorf("Err = %v, want errors.Is %v", out.Err, w.ErrIs)
	}
	if w.ErrIs == nil && (errors.Is(out.Err, invoker.ErrAuthRequired) || errors.Is(out.Err, invoker.ErrRateLimited)) {
		t.Errorf("Err = %v, want no auth or rate-limit sentinel", out.Err)
	}
}

// limits maps the Request field a golden case names in Limit to the
// sentinel a *LimitError carries for it.
var limits = map[string]error{"MaxTurns": invoker.ErrMaxTurns, "MaxBudgetUSD": invoker.ErrMaxBudget}
