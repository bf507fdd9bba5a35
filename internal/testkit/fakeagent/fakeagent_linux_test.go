// The tests read /proc to check process groups, sessions and parents.

package fakeagent

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
)

// lineTimeout bounds every wait for the fake's output, so a broken fake
// fails the test instead of hanging it. It is a guard, not a budget: two
// minutes (scaled by CLINVOKE_TEST_TIMEOUT_SCALE) covers a 64 MiB line under
// the race detector on a busy two-core machine.
var lineTimeout = testenv.Timeout(2 * time.Minute)

// agentRun is one fake agent started by a test from the test binary, in
// its own process group as the library starts CLIs.
type agentRun struct {
	t      *testing.T
	s      Script
	cmd    *exec.Cmd
	lines  chan []byte // stdout lines; closed at EOF
	stdout *os.File    // the test's read end of stdout
	mu     sync.Mutex
	stderr bytes.Buffer
	errEOF chan struct{}
	waited bool
}

// start runs s with args, feeding stdin (nil: an empty, closed stdin). It
// fills in a RecordDir and a Tag, and registers a cleanup that kills
// whatever is left of the tree and waits for the readers.
func start(t *testing.T, s Script, stdin io.Reader, args ...string) *agentRun {
	t.Helper()
	return startIn(t, "", s, stdin, args...)
}

// startIn is start with the fake in the working directory dir ("" for
// the test's).
func startIn(t *testing.T, dir string, s Script, stdin io.Reader, args ...string) *agentRun {
	t.Helper()
	return startEnv(t, dir, s, nil, stdin, args...)
}

// startEnv is startIn with env added to the fake's environment, after
// (and so over) the script's.
func startEnv(t *testing.T, dir string, s Script, env []string, stdin io.Reader, args ...string) *agentRun {
	t.Helper()
	if s.RecordDir == "" {
		s.RecordDir = t.TempDir()
	}
	if s.Tag == "" {
		s.Tag = NewTag()
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), s.Env()...), env...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	r := &agentRun{t: t, s: s, cmd: cmd, lines: make(chan []byte, 1<<12), stdout: outR, errEOF: make(chan struct{})}
	go func() {
		defer close(r.lines)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				r.lines <- bytes.TrimSuffix(l, []byte("\n"))
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(r.errEOF)
		var b [4096]byte
		for {
			n, err := errR.Read(b[:])
			r.mu.Lock()
			r.stderr.Write(b[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if !r.waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if rec, err := ReadRecord(s.RecordDir); err == nil {
			rec.Kill()
		}
		killAll(withEnv(EnvTag + "=" + s.Tag))
		for range r.lines {
		}
		<-r.errEOF
		outR.Close()
		errR.Close()
	})
	return r
}

// next returns the next stdout line, failing the test at EOF.
func (r *agentRun) next() []byte {
	r.t.Helper()
	select {
	case l, ok := <-r.lines:
		if !ok {
			r.t.Fatal("stdout closed, want another line")
		}
		return l
	case <-time.After(lineTimeout):
		r.t.Fatal("no line from the fake agent")
	}
	return nil
}

// rest returns the remaining stdout lines up to EOF.
func (r *agentRun) rest() [][]byte {
	r.t.Helper()
	var ls [][]byte
	timeout := time.After(lineTimeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				return ls
			}
			ls = append(ls, l)
		case <-timeout:
			r.t.Fatal("stdout not closed")
		}
	}
}

// wait waits for the fake to exit and returns its exit code (-1 if a
// signal killed it).
func (r *agentRun) wait() int {
	r.t.Helper()
	r.cmd.Wait()
	r.waited = true
	return r.cmd.ProcessState.ExitCode()
}

// finish reads all output, waits for exit and returns the lines and code.
func (r *agentRun) finish() ([][]byte, int) {
	r.t.Helper()
	ls := r.rest()
	return ls, r.wait()
}

// stderrNow returns what the fake has written to stderr so far.
func (r *agentRun) stderrNow() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

func (r *agentRun) stderrText() string {
	<-r.errEOF
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

func (r *agentRun) record() *Record {
	r.t.Helper()
	rec, err := ReadRecord(r.s.RecordDir)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// outcome is what a decoder following docs/cli-facts.md makes of a stream.
type outcome struct {
	session   string
	answer    string
	terminal  string // "success", "failure", "interrupted" or ""
	message   string // failure message
	malformed int    // lines that are not JSON objects
	kinds     []string
}

// decode is a reference decoder: the rules for the final answer and the
// terminal event that the real CLIs follow (docs/cli-facts.md, "stdout events").
func decode(t *testing.T, flavor string, lines [][]byte) outcome {
	t.Helper()
	var o outcome
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal(l, &ev); err != nil {
			o.malformed++
			continue
		}
		k := kind(ev)
		o.kinds = append(o.kinds, k)
		str := func(m map[string]any, key string) string { s, _ := m[key].(string); return s }
		item, _ := ev["item"].(map[string]any)
		switch flavor {
		case Codex:
			switch k {
			case "thread.started":
				o.session = str(ev, "thread_id")
			case "item.completed/agent_message":
				o.answer = str(item, "text")
			case "turn.completed":
				o.terminal = "success"
			case "turn.failed":
				o.terminal = "failure"
				o.message = str(ev["error"].(map[string]any), "message")
			}
		case Gemini:
			switch k {
			case "init":
				o.session = str(ev, "session_id")
			case "message/assistant":
				o.answer += str(ev, "content")
			case "result/success":
				o.terminal = "success"
			case "result/error":
				o.terminal = "failure"
				if e, ok := ev["error"].(map[string]any); ok {
					o.message = str(e, "message")
				}
			}
		case Claude:
			switch {
			case k == "system/init":
				o.session = str(ev, "session_id")
			case k == "result/error_during_execution":
				o.terminal = "interrupted"
			case strings.HasPrefix(k, "result/"):
				o.answer = str(ev, "result")
				o.terminal = "success"
				if ev["is_error"] == true {
					o.terminal = "failure"
					o.message = o.answer
				}
			}
		}
	}
	return o
}

// kind names an event the way the samples are compared: its type, refined
// by the item type (codex), role (gemini messages), subtype or content
// block type (claude).
func kind(ev map[string]any) string {
	k, _ := ev["type"].(string)
	if item, ok := ev["item"].(map[string]any); ok {
		return k + "/" + item["type"].(string)
	}
	if r, ok := ev["role"].(string); ok {
		return k + "/" + r
	}
	if st, ok := ev["subtype"].(string); ok {
		return k + "/" + st
	}
	if k == "result" {
		s, _ := ev["status"].(string)
		return k + "/" + s
	}
	if msg, ok := ev["message"].(map[string]any); ok {
		if c, ok := msg["content"].([]any); ok && len(c) > 0 {
			b, _ := c[0].(map[string]any)
			s, _ := b["type"].(string)
			return k + "/" + s
		}
	}
	return k
}

var flavors = []string{Codex, Gemini, Claude}

func TestZeroScript(t *testing.T) {
	t.Parallel()
	r := start(t, Script{}, nil)
	lines, code := r.finish()
	if code != 0 {
		t.Errorf("exit code = %d, want 0", code)
	}
	o := decode(t, Codex, lines)
	want := []string{"thread.started", "turn.started", "item.completed/agent_message", "turn.completed"}
	if !slices.Equal(o.kinds, want) {
		t.Errorf("events = %v, want %v", o.kinds, want)
	}
	if o.answer != DefaultAnswer || o.terminal != "success" {
		t.Errorf("answer, terminal = %q, %q; want %q, success", o.answer, o.terminal, DefaultAnswer)
	}
}

// TestFlavours checks each flavour's stream against the rules a decoder
// relies on: one session id, the final answer, the terminal event.
func TestFlavours(t *testing.T) {
	for _, fl := range flavors {
		for name, s := range map[string]Script{
			"plain":  {},
			"tool":   {Tool: true},
			"chunks": {Chunks: 3, Interval: time.Millisecond, Answer: "one, two, three: done"},
			"stream": {StreamFor: 60 * time.Millisecond, Interval: 5 * time.Millisecond, Tool: true, Chunks: 2},
		} {
			t.Run(fl+"/"+name, func(t *testing.T) {
				t.Parallel()
				s.Flavor = fl
				s.SessionID = "sess-" + fl
				r := start(t, s, strings.NewReader("say hi"))
				lines, code := r.finish()
				if code != 0 {
					t.Errorf("exit code = %d, want 0; stderr: %s", code, r.stderrText())
				}
				o := decode(t, fl, lines)
				if o.malformed != 0 {
					t.Errorf("%d lines are not JSON", o.malformed)
				}
				if o.session != s.SessionID {
					t.Errorf("session = %q, want %q", o.session, s.SessionID)
				}
				if o.answer != s.answer() || o.terminal != "success" {
					t.Errorf("answer, terminal = %q, %q; want %q, success", o.answer, o.terminal, s.answer())
				}
				for _, l := range lines {
					if sid := sessionOf(l); sid != "" && sid != s.SessionID {
						t.Errorf("line carries session %q, want %q: %s", sid, s.SessionID, l)
					}
				}
				if s.Tool {
					want := map[string]string{Codex: "item.completed/command_execution", Gemini: "tool_result", Claude: "user/tool_result"}[fl]
					if !slices.Contains(o.kinds, want) {
						t.Errorf("events %v lack %s", o.kinds, want)
					}
				}
				if s.Chunks > 0 {
					want := map[string]string{Codex: "item.completed/agent_message", Gemini: "message/assistant", Claude: "assistant/text"}[fl]
					if n := count(o.kinds, want); n != s.Chunks {
						t.Errorf("%d %s events, want %d", n, want, s.Chunks)
					}
				}
				if s.StreamFor > 0 {
					want := map[string]string{Codex: "item.completed/reasoning", Gemini: "tool_use", Claude: "assistant/thinking"}[fl]
					if n := count(o.kinds, want); n < 1 {
						t.Errorf("%d progress events (%s) in %v, want some", n, want, s.StreamFor)
					}
				}
			})
		}
	}
}

func count(kinds []string, k string) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

func sessionOf(l []byte) string {
	var ev struct {
		S string `json:"session_id"`
	}
	json.Unmarshal(l, &ev)
	return ev.S
}

// TestClaudeChunksShareMessage checks that chunked text blocks are one
// assistant message, as Claude Code prints one event per content block.
func TestClaudeChunksShareMessage(t *testing.T) {
	t.Parallel()
	r := start(t, Script{Flavor: Claude, Chunks: 3, Tool: true, Interval: time.Millisecond}, nil)
	lines, _ := r.finish()
	ids := map[string]int{}
	for _, l := range lines {
		var ev struct {
			Type    string
			Message struct {
				ID      string
				Content []struct{ Type string }
			}
		}
		json.Unmarshal(l, &ev)
		if ev.Type == "assistant" && ev.Message.Content[0].Type == "text" {
			ids[ev.Message.ID]++
		}
	}
	if len(ids) != 1 {
		t.Errorf("text blocks in messages %v, want one message", ids)
	}
}

// TestShapesMatchSamples checks that every event the fake prints has the
// same fields, in the same order, as an event of the same kind captured
// from the real CLI (testdata/), at the top level and in item/message.
func TestShapesMatchSamples(t *testing.T) {
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			t.Parallel()
			samples := map[string][]string{} // kind → field lists seen
			files, _ := filepath.Glob(filepath.Join("testdata", fl, "*.stdout"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for l := range bytes.Lines(b) {
					var ev map[string]any
					if json.Unmarshal(l, &ev) == nil {
						samples[kind(ev)] = append(samples[kind(ev)], fieldList(t, l))
					}
				}
			}
			var lines [][]byte
			for _, s := range []Script{
				{Tool: true, StreamFor: 30 * time.Millisecond, Interval: 5 * time.Millisecond},
				{Fail: "model exploded"},
			} {
				s.Flavor = fl
				ls, _ := start(t, s, strings.NewReader("say hi")).finish()
				lines = append(lines, ls...)
			}
			if fl == Claude {
				// The structured-answer and limit flags (structured.go).
				for _, run := range []struct {
					s    Script
					args []string
				}{
					{Script{Answer: `{"name":"Ada"}`}, []string{"--json-schema=" + nameSchema}},
					{Script{Answer: "not json"}, []string{"--json-schema=" + nameSchema}},
					{Script{Tool: true}, []string{"--max-turns=1"}},
					{Script{Tool: true}, []string{"--max-budget-usd=0.000001"}},
				} {
					run.s.Flavor = fl
					ls, _ := start(t, run.s, strings.NewReader("say hi"), run.args...).finish()
					lines = append(lines, ls...)
				}
			}
			matched := map[string]bool{}
			for _, l := range lines {
				var ev map[string]any
				if err := json.Unmarshal(l, &ev); err != nil {
					t.Fatalf("not JSON: %s", l)
				}
				k := kind(ev)
				got := fieldList(t, l)
				want, ok := samples[k]
				if !ok {
					t.Errorf("%s: no captured event of this kind", k)
					continue
				}
				if !slices.Contains(want, got) {
					t.Errorf("%s fields:\n got %s\nwant one of %q", k, got, want)
				}
				matched[k] = true
			}
			t.Logf("kinds matched: %v", slices.Sorted(func(yield func(string) bool) {
				for k := range matched {
					if !yield(k) {
						return
					}
				}
			}))
		})
	}
}

// fieldList lists the keys of a JSON object in order, followed by those of
// its "item" or "message" object.
func fieldList(t *testing.T, line []byte) string {
	t.Helper()
	var top []string
	var nested string
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.Token() // {
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, line)
		}
		key := k.(string)
		top = append(top, key)
		var raw json.RawMessage
		dec.Decode(&raw)
		if (key == "item" || key == "message") && len(raw) > 0 && raw[0] == '{' {
			nested = " " + key + "{" + fieldList(t, raw) + "}"
		}
	}
	return strings.Join(top, ",") + nested
}

func TestFail(t *testing.T) {
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			t.Parallel()
			r := start(t, Script{Flavor: fl, Fail: "quota exhausted"}, nil)
			lines, code := r.finish()
			o := decode(t, fl, lines)
			if o.terminal != "failure" || o.message != "quota exhausted" {
				t.Errorf("terminal, message = %q, %q; want failure, quota exhausted", o.terminal, o.message)
			}
			want := map[string]int{Codex: 1, Claude: 1, Gemini: 0}[fl]
			if code != want {
				t.Errorf("exit code = %d, want %d", code, want)
			}
		})
	}
	t.Run("exit code kept", func(t *testing.T) {
		t.Parallel()
		_, code := start(t, Script{Flavor: Gemini, Fail: "unauthorized", ExitCode: 145}, nil).finish()
		if code != 145 {
			t.Errorf("exit code = %d, want 145", code)
		}
	})
}

func TestNoTerminal(t *testing.T) {
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			t.Parallel()
			lines, code := start(t, Script{Flavor: fl, NoTerminal: true}, nil).finish()
			o := decode(t, fl, lines)
			if o.terminal != "" || code != 0 {
				t.Errorf("terminal, code = %q, %d; want none, 0", o.terminal, code)
			}
			if fl != Claude && o.answer != DefaultAnswer { // claude's answer is in its result
				t.Errorf("answer = %q, want %q", o.answer, DefaultAnswer)
			}
		})
	}
}

func TestExitCodeAndStderr(t *testing.T) {
	t.Parallel()
	r := start(t, Script{ExitCode: 3, Stderr: "Error: something broke\n"}, nil)
	lines, code := r.finish()
	if code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	if got := r.stderrText(); got != "Error: something broke\n" {
		t.Errorf("stderr = %q", got)
	}
	if o := decode(t, Codex, lines); o.terminal != "success" {
		t.Errorf("terminal = %q, want success (the stream is independent of the status)", o.terminal)
	}
}

// TestStderrBeforeStdin checks that Stderr is printed while the fake still
// waits for its standard input, as Codex prints "Reading additional input
// from stdin...".
func TestStderrBeforeStdin(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	r := start(t, Script{Stderr: "Reading additional input from stdin...\n"}, pr)
	want := "Reading additional input from stdin...\n"
	require.Eventually(t, func() bool { return r.stderrNow() == want }, lineTimeout, 5*time.Millisecond,
		"stderr = %q while stdin is open, want %q", r.stderrNow(), want)
	select {
	case l := <-r.lines:
		t.Fatalf("event %s before stdin was closed", l)
	default:
	}
	pw.Write([]byte("prompt"))
	pw.Close()
	if _, code := r.finish(); code != 0 {
		t.Errorf("exit code = %d", code)
	}
	if rec := r.record(); rec.StdinLen != 6 {
		t.Errorf("StdinLen = %d, want 6", rec.StdinLen)
	}
}

func TestMalformed(t *testing.T) {
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			t.Parallel()
			lines, _ := start(t, Script{Flavor: fl, Malformed: true}, nil).finish()
			var empty, invalid int
			for _, l := range lines {
				if len(l) == 0 {
					empty++
				}
				if !utf8.Valid(l) {
					invalid++
				}
			}
			o := decode(t, fl, lines)
			if empty != 1 || invalid != 1 || o.malformed < 4 {
				t.Errorf("empty, invalid UTF-8, not JSON = %d, %d, %d; want 1, 1, >=4", empty, invalid, o.malformed)
			}
			if o.answer != DefaultAnswer || o.terminal != "success" {
				t.Errorf("answer, terminal = %q, %q", o.answer, o.terminal)
			}
		})
	}
}

func TestHugeLine(t *testing.T) {
	sizes := []int{1 << 20, 100}
	if !testing.Short() {
		sizes = append(sizes, 64<<20)
	}
	for _, fl := range flavors {
		for _, size := range sizes {
			if size == 64<<20 && fl != Codex {
				continue // one 64 MiB line is enough on a shared machine
			}
			t.Run(fl+"/"+sizeName(size), func(t *testing.T) {
				t.Parallel()
				lines, _ := start(t, Script{Flavor: fl, HugeLine: size}, nil).finish()
				var big []byte
				bigAt := 0
				for i, l := range lines {
					if len(l) > len(big) {
						big, bigAt = l, i
					}
				}
				if size > 1000 && len(big) != size {
					t.Errorf("longest line = %d bytes, want %d", len(big), size)
				}
				if !json.Valid(big) {
					t.Errorf("huge line is not valid JSON")
				}
				if size > 1000 {
					lines = slices.Delete(lines, bigAt, bigAt+1) // decoding it is slow under -race
				}
				if o := decode(t, fl, lines); o.answer != DefaultAnswer || o.terminal != "success" {
					t.Errorf("answer, terminal = %q, %q", o.answer, o.terminal)
				}
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n)
}

func TestStdin(t *testing.T) {
	t.Parallel()
	prompt := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16) // 10 MiB
	prompt[12345] = '\n'
	r := start(t, Script{}, bytes.NewReader(prompt))
	if _, code := r.finish(); code != 0 {
		t.Fatalf("exit code = %d", code)
	}
	rec := r.record()
	sum := sha256.Sum256(prompt)
	if !rec.StdinRead || rec.StdinLen != int64(len(prompt)) || rec.StdinSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("record: read %v, len %d, sha256 %s; want true, %d, %x", rec.StdinRead, rec.StdinLen, rec.StdinSHA256, len(prompt), sum)
	}
	if got, err := rec.Stdin(); err != nil || !bytes.Equal(got, prompt) {
		t.Errorf("Stdin() = %d bytes, %v; want the prompt", len(got), err)
	}
}

func TestSkipStdin(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe() // never written nor closed by the fake
	defer pw.Close()
	r := start(t, Script{SkipStdin: true}, pr)
	r.rest()
	pw.Close()
	if code := r.wait(); code != 0 {
		t.Errorf("exit code = %d", code)
	}
	if rec := r.record(); rec.StdinRead {
		t.Errorf("StdinRead = true, want false")
	}
}

func TestGeminiPromptEcho(t *testing.T) {
	t.Parallel()
	lines, _ := start(t, Script{Flavor: Gemini}, strings.NewReader("context"), "-o", "stream-json", "-p", "question").finish()
	var ev struct{ Role, Content string }
	json.Unmarshal(lines[1], &ev)
	if ev.Role != "user" || ev.Content != "question\n\ncontext" {
		t.Errorf("echo = %+v, want user %q", ev, "question\n\ncontext")
	}
}

func TestRecordArgsEnvDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Script{RecordDir: t.TempDir(), Tag: NewTag()}
	cmd := exec.Command(os.Args[0], "exec", "--json", "--", "-not-a-flag")
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Env = append(cmd.Env, "EXTRA=1")
	cmd.Dir = dir
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rec, err := ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"exec", "--json", "--", "-not-a-flag"}; !slices.Equal(rec.Args, want) {
		t.Errorf("Args = %q, want %q", rec.Args, want)
	}
	if rec.Dir != dir {
		t.Errorf("Dir = %q, want %q", rec.Dir, dir)
	}
	if v, _ := rec.Getenv("EXTRA"); v != "1" {
		t.Errorf("EXTRA = %q, want 1", v)
	}
	if v, _ := rec.Getenv(EnvTag); v != s.Tag {
		t.Errorf("%s = %q, want %q", EnvTag, v, s.Tag)
	}
	if len(rec.Procs) != 1 || rec.Procs[0].Pid != cmd.Process.Pid || rec.Procs[0].Role != "agent" {
		t.Errorf("Procs = %+v, want the agent (pid %d)", rec.Procs, cmd.Process.Pid)
	}
	if a := rec.Alive(); len(a) != 0 {
		t.Errorf("Alive() = %v after exit", a)
	}
}

var (
	uuid4RE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuid7RE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

func TestSessionIDs(t *testing.T) {
	cases := []struct {
		name, flavor string
		args         []string
		want         string
		re           *regexp.Regexp
	}{
		{"codex new", Codex, []string{"exec", "--json", "-"}, "", uuid7RE},
		{"gemini new", Gemini, []string{"-o", "stream-json"}, "", uuid4RE},
		{"claude new", Claude, []string{"-p", "--verbose"}, "", uuid4RE},
		{"codex resume", Codex, []string{"exec", "--json", "resume", "thread-1", "-"}, "thread-1", nil},
		{"codex resume after --", Codex, []string{"exec", "--json", "--config=sandbox_mode=\"read-only\"", "resume", "--image=/a.png", "--", "thread-2", "-"}, "thread-2", nil},
		{"codex prompt without resume", Codex, []string{"exec", "--json", "--", "-"}, "", uuid7RE},
		{"gemini resume", Gemini, []string{"-o", "stream-json", "-r", "g-1"}, "g-1", nil},
		{"claude resume", Claude, []string{"-p", "--resume=c-1"}, "c-1", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lines, _ := start(t, Script{Flavor: c.flavor}, nil, c.args...).finish()
			o := decode(t, c.flavor, lines)
			if c.re != nil && !c.re.MatchString(o.session) || c.re == nil && o.session != c.want {
				t.Errorf("session = %q, want %v", o.session, cmp(c.want, c.re))
			}
		})
	}
}

func cmp(s string, re *regexp.Regexp) any {
	if re != nil {
		return re
	}
	return s
}

func TestSilentFor(t *testing.T) {
	t.Parallel()
	const silent = 300 * time.Millisecond
	begin := time.Now()
	r := start(t, Script{SilentFor: silent}, nil)
	r.next()
	if d := time.Since(begin); d < silent {
		t.Errorf("first line after %v, want >= %v", d, silent)
	}
	r.finish()
}

func TestReplay(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "claude", "tool-default.stdout")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines, code := start(t, Script{Flavor: Claude, Replay: path, Interval: time.Millisecond}, nil).finish()
	if got := append(bytes.Join(lines, []byte("\n")), '\n'); !bytes.Equal(got, want) || code != 0 {
		t.Errorf("replay differs from %s (exit %d):\n%s", path, code, got)
	}
}

// TestSignals sends SIGINT or SIGTERM once the first event is read and
// checks that each flavour ends like its real CLI (docs/cli-facts.md).
func TestSignals(t *testing.T) {
	cases := []struct {
		flavor   string
		sig      syscall.Signal
		code     int
		terminal string
	}{
		{Codex, syscall.SIGINT, 1, ""},
		{Codex, syscall.SIGTERM, 143, ""},
		{Claude, syscall.SIGINT, 0, "interrupted"},
		{Claude, syscall.SIGTERM, 143, ""},
		{Gemini, syscall.SIGINT, 0, ""},
		{Gemini, syscall.SIGTERM, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.flavor+"/"+c.sig.String(), func(t *testing.T) {
			t.Parallel()
			r := start(t, Script{Flavor: c.flavor, StreamFor: time.Hour}, nil)
			first := r.next()
			r.cmd.Process.Signal(c.sig)
			lines, code := r.finish()
			o := decode(t, c.flavor, append([][]byte{first}, lines...))
			if code != c.code || o.terminal != c.terminal {
				t.Errorf("exit code, terminal = %d, %q; want %d, %q", code, o.terminal, c.code, c.terminal)
			}
			if c.terminal == "interrupted" {
				var res struct {
					IsError   bool   `json:"is_error"`
					SessionID string `json:"session_id"`
				}
				json.Unmarshal(lines[len(lines)-1], &res)
				if !res.IsError || res.SessionID != o.session {
					t.Errorf("result %s: want is_error and session %q", lines[len(lines)-1], o.session)
				}
			}
		})
	}
}

// TestIgnoreSignals checks that a fake with IgnoreSignals goes on printing
// after SIGINT and SIGTERM and dies only of SIGKILL.
func TestIgnoreSignals(t *testing.T) {
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			t.Parallel()
			r := start(t, Script{Flavor: fl, StreamFor: time.Hour, Interval: 5 * time.Millisecond, IgnoreSignals: true}, nil)
			r.next()
			r.cmd.Process.Signal(syscall.SIGINT)
			r.cmd.Process.Signal(syscall.SIGTERM)
			// The signals are delivered within microseconds; a fake that
			// obeyed them would have exited long before 40 more events.
			for range 40 {
				r.next()
			}
			r.cmd.Process.Kill()
			if _, code := r.finish(); code != -1 {
				t.Errorf("exit code = %d, want -1 (killed)", code)
			}
		})
	}
}

// procOf returns the /proc stat of pid, failing the test if it is gone.
func procOf(t *testing.T, pid int) stat {
	t.Helper()
	st, ok := readStat(pid)
	if !ok {
		t.Fatalf("pid %d: no /proc entry", pid)
	}
	return st
}

// awaitGone waits until none of the record's processes is alive.
func awaitGone(t *testing.T, rec *Record) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, rec.Alive(), "processes of the fake still alive")
	}, lineTimeout, 5*time.Millisecond)
}

// TestGrandchild checks that the grandchild is recorded, runs in the fake's
// process group, outlives the fake, and is gone once killed by pid.
func TestGrandchild(t *testing.T) {
	t.Parallel()
	r := start(t, Script{Grandchild: true, StallFor: time.Hour}, nil)
	r.next()
	rec := r.record()
	agent, sleeper := rec.Pid("agent"), rec.Pid("sleeper")
	if agent != r.cmd.Process.Pid || sleeper == 0 {
		t.Fatalf("Procs = %+v, want the agent (%d) and a sleeper", rec.Procs, r.cmd.Process.Pid)
	}
	if got := rec.Alive(); !slices.Equal(got, []int{agent, sleeper}) {
		t.Errorf("Alive() = %v, want %v", got, []int{agent, sleeper})
	}
	if st := procOf(t, sleeper); st.pgrp != agent || st.ppid != agent {
		t.Errorf("sleeper pgrp, ppid = %d, %d; want the agent's group and the agent (%d)", st.pgrp, st.ppid, agent)
	}
	if got := Survivors(r.s.Tag); !slices.Equal(got, []int{agent, sleeper}) && !slices.Equal(got, []int{sleeper, agent}) {
		t.Errorf("Survivors(tag) = %v, want %v", got, []int{agent, sleeper})
	}
	if !slices.Contains(Orphans(), sleeper) {
		t.Errorf("Orphans() = %v, want it to hold %d", Orphans(), sleeper)
	}

	// Killing the fake's process group's leader alone leaves the sleeper.
	r.cmd.Process.Kill()
	r.wait()
	if got := rec.Alive(); !slices.Equal(got, []int{sleeper}) {
		t.Errorf("after killing the agent, Alive() = %v, want [%d]", got, sleeper)
	}
	syscall.Kill(sleeper, syscall.SIGKILL)
	awaitGone(t, rec)
	if s := Survivors(r.s.Tag); len(s) != 0 {
		t.Errorf("Survivors(tag) = %v after killing every process", s)
	}
}

// TestEscapee checks that the escapee's child is recorded, lives in another
// session, has lost its parent, carries the tag, and is gone once killed.
func TestEscapee(t *testing.T) {
	t.Parallel()
	r := start(t, Script{Escapee: true, StallFor: time.Hour}, nil)
	r.next()
	rec := r.record()
	agent, escapee, escaped := rec.Pid("agent"), rec.Pid("escapee"), rec.Pid("escaped")
	if escapee == 0 || escaped == 0 {
		t.Fatalf("Procs = %+v, want agent, escapee and escaped", rec.Procs)
	}
	if got := rec.Alive(); !slices.Equal(got, []int{agent, escaped}) {
		t.Errorf("Alive() = %v, want agent and escaped %v (the escapee exits at once)", got, []int{agent, escaped})
	}
	ag, es := procOf(t, agent), procOf(t, escaped)
	if es.session == ag.session || es.session != escapee || es.pgrp != escapee {
		t.Errorf("escaped session, group = %d, %d; want the escapee's (%d), not the agent's (%d)", es.session, es.pgrp, escapee, ag.session)
	}
	if es.ppid == escapee || es.ppid == agent {
		t.Errorf("escaped ppid = %d, want it re-parented away from %d and %d", es.ppid, escapee, agent)
	}
	if !slices.Contains(Survivors(r.s.Tag), escaped) {
		t.Errorf("Survivors(tag) = %v, want it to hold %d", Survivors(r.s.Tag), escaped)
	}
	syscall.Kill(-agent, syscall.SIGKILL) // the whole group: not enough
	r.wait()
	if got := rec.Alive(); !slices.Equal(got, []int{escaped}) {
		t.Errorf("after killing the agent's group, Alive() = %v, want [%d]", got, escaped)
	}
	syscall.Kill(escaped, syscall.SIGKILL)
	awaitGone(t, rec)
	if s := Survivors(r.s.Tag); len(s) != 0 {
		t.Errorf("Survivors(tag) = %v after killing every process", s)
	}
}

// TestHoldStdout checks that the fake exits after its stream while its
// helper keeps stdout open, and that stdout closes once the helper dies.
func TestHoldStdout(t *testing.T) {
	t.Parallel()
	r := start(t, Script{HoldStdout: true}, nil)
	var lines [][]byte
	for o := (outcome{}); o.terminal == ""; o = decode(t, Codex, lines) {
		lines = append(lines, r.next())
	}
	if code := r.wait(); code != 0 {
		t.Errorf("exit code = %d", code)
	}
	rec := r.record()
	holder := rec.Pid("holder")
	if got := rec.Alive(); !slices.Equal(got, []int{holder}) {
		t.Fatalf("Alive() = %v, want the holder [%d]", got, holder)
	}
	// The holder's stdout and stderr are the pipes the test reads.
	ours, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(r.stdout.Fd())))
	theirs, _ := os.Readlink("/proc/" + strconv.Itoa(holder) + "/fd/1")
	if ours == "" || ours != theirs {
		t.Errorf("holder stdout = %q, want the test's pipe %q", theirs, ours)
	}
	select {
	case l, ok := <-r.lines:
		t.Fatalf("stdout line %q or EOF (%v) while the holder lives", l, !ok)
	default:
	}
	syscall.Kill(holder, syscall.SIGKILL)
	if rest := r.rest(); len(rest) != 0 { // returns at EOF
		t.Errorf("extra lines %q", rest)
	}
	awaitGone(t, rec)
}

// TestSignalWhileReadingStdin checks that a fake still waiting for its
// prompt handles SIGINT like its CLI: the handler is installed before
// Stderr is printed, and Stderr before stdin is read.
func TestSignalWhileReadingStdin(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	r := start(t, Script{Flavor: Claude, Stderr: "waiting\n"}, pr)
	require.Eventually(t, func() bool { return r.stderrNow() != "" }, lineTimeout, 5*time.Millisecond,
		"no stderr from the fake")
	r.cmd.Process.Signal(syscall.SIGINT)
	lines := r.rest()
	pw.Close()
	if code := r.wait(); code != 0 {
		t.Errorf("exit code = %d, want 0", code)
	}
	if o := decode(t, Claude, lines); len(lines) != 1 || o.terminal != "interrupted" {
		t.Errorf("lines %q, want only the interrupted result", lines)
	}
}

type fakeM struct{ run func() int }

func (m fakeM) Run() int { return m.run() }

// TestCheckOrphans checks that CheckOrphans fails a run that leaves a fake
// agent's process behind, and kills it. It must not run in parallel: it
// sees every fake of this test binary.
func TestCheckOrphans(t *testing.T) {
	var rec *Record
	m := CheckOrphans(fakeM{func() int {
		r := start(t, Script{Grandchild: true}, nil)
		r.finish()
		rec = r.record()
		return 0
	}})
	if code := m.Run(); code != 1 {
		t.Errorf("Run() = %d with a grandchild left, want 1", code)
	}
	if a := rec.Alive(); len(a) != 0 {
		t.Errorf("Alive() = %v after CheckOrphans, want none", a)
	}
	if code := CheckOrphans(fakeM{func() int { return 0 }}).Run(); code != 0 {
		t.Errorf("Run() = %d with nothing left, want 0", code)
	}
}
