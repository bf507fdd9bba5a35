package mcpadapter

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// The transcript's lines, as written before TranscriptEntry embedded
// Output: the same entries must give the same bytes.
const (
	goldenFull = `{"time":"2026-11-27T01:02:03.456Z","run":"R1","tool":"codex_parallel","cli":"codex","task":2,"prompt":"fix it",` +
		`"workdir":"/src/p","permission":"workspace-write","model":"gpt-5","resume_session_id":"0199a213-81c0-7800-8aa1-bbab2a035a53",` +
		`"system_prompt":"be brief","images":["/src/p/a.png"],"status":"failed","text":"half",` +
		`"session_id":"0199a213-81c0-7800-8aa1-bbab2a035a53","exit_code":1,"duration_ms":1500,` +
		`"usage":{"input_tokens":10,"cached_input_tokens":2,"output_tokens":5},"error":"exit status 1","stderr":"boom"}`
	goldenRefused = `{"time":"2026-11-27T01:02:03Z","tool":"codex","cli":"codex","prompt":"hi","workdir":"/","permission":"read-only",` +
		`"status":"refused","text":"","exit_code":-1,"duration_ms":0,"usage":{},"error":"workdir / is not under a root"}`
)

func TestTranscriptLineShape(t *testing.T) {
	task := 2
	full := TranscriptEntry{Time: time.Date(2026, 11, 27, 1, 2, 3, 456000000, time.UTC), Run: "R1", Tool: "codex_parallel", CLI: "codex", Task: &task,
		Prompt: "fix it", Workdir: "/src/p", Permission: invoker.WorkspaceWrite, Model: "gpt-5", ResumeSessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53",
		SystemPrompt: "be brief", Images: []string{"/src/p/a.png"},
		Output: Output{Status: StatusFailed, Text: "half", SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53", ExitCode: 1, DurationMS: 1500,
			Usage: invoker.Usage{InputTokens: 10, CachedInputTokens: 2, OutputTokens: 5}, Error: "exit status 1",
			// Not recorded: the line keeps its shape.
			Resume: "To continue this session, call codex again.", Structured: json.RawMessage(`{"a":1}`), Turns: 3},
		Stderr: "boom"}
	refused := TranscriptEntry{Time: time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC), Tool: "codex", CLI: "codex", Prompt: "hi", Workdir: "/",
		Permission: invoker.ReadOnly, Output: Output{Status: StatusRefused, ExitCode: -1, Error: "workdir / is not under a root"}}
	for _, tc := range []struct {
		name   string
		e      TranscriptEntry
		golden string
	}{
		{"full", full, goldenFull},
		{"refused", refused, goldenRefused},
	} {
		for _, v := range []any{tc.e, &tc.e} { // transcript.append marshals a pointer
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.golden {
				t.Errorf("%s: json.Marshal(%T) =\n%s\nwant\n%s", tc.name, v, b, tc.golden)
			}
		}
		// Round trip: a line read back and written again is the same line.
		var back TranscriptEntry
		if err := json.Unmarshal([]byte(tc.golden), &back); err != nil {
			t.Fatal(err)
		}
		if b, err := json.Marshal(back); err != nil || string(b) != tc.golden {
			t.Errorf("%s: line read back and written again =\n%s (%v)\nwant\n%s", tc.name, b, err, tc.golden)
		}
	}
}

// TestTranscriptRecordsOutput checks the lines the tools write: the
// answer's Output, less what the transcript does not record.
func TestTranscriptRecordsOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	tl := newTool(t, &Options{TranscriptPath: path}, &counter{})
	req := invoker.Request{Prompt: "p", Workdir: "/w", Permission: invoker.ReadOnly, SessionID: "s0"}
	out := Output{Status: StatusFailed, Text: "t", SessionID: "s1", ExitCode: 2, DurationMS: 7, Error: "e",
		Resume: "call again", Structured: json.RawMessage(`{}`), Turns: 4}
	tl.recordStart(context.Background(), "codex", nil, "R", &req, "s1", time.Now())
	tl.record(context.Background(), "codex", nil, "R", &req, &invoker.Result{Stderr: "tail"}, out, time.Now())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("transcript:\n%s\nwant two lines", data)
	}
	for i, want := range []string{
		`"run","tool","cli","prompt","workdir","permission","resume_session_id","status","text","session_id","exit_code","duration_ms","usage"`,
		`"run","tool","cli","prompt","workdir","permission","resume_session_id","status","text","session_id","exit_code","duration_ms","usage","error","stderr"`,
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		for _, k := range strings.Split(want, ",") {
			k = strings.Trim(k, `"`)
			if _, ok := m[k]; !ok {
				t.Errorf("line %d: no %q in %s", i, k, lines[i])
			}
			delete(m, k)
		}
		if len(m) > 0 {
			t.Errorf("line %d: keys %v that the transcript never had, in %s", i, m, lines[i])
		}
	}
	var e TranscriptEntry
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Status != StatusFailed || e.SessionID != "s1" || e.ResumeSessionID != "s0" || e.ExitCode != 2 || e.Stderr != "tail" || e.Resume != "" {
		t.Errorf("final line read back: %+v", e)
	}
}
