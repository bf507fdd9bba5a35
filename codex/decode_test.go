package codex

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

func TestGolden(t *testing.T) {
	const thread = "01a1fc51-6e29-7c22-b652-9fbf529842b4"
	usage11 := invoker.Usage{InputTokens: 11, OutputTokens: 5}
	usage22 := invoker.Usage{InputTokens: 22, OutputTokens: 10}
	tests := []golden.Want{
		{File: "basic.stdout", SessionID: thread, Text: "hi there", Usage: usage11, Success: true},
		{File: "noevent.stdout", SessionID: "01a1fc63-af24-7050-9df3-3124981dbc9d", Text: "hi there", Usage: usage11, Success: true},
		{File: "model-gpt-5.stdout", SessionID: "01a1fc51-acfb-7a32-8d1a-33322048ff03", Text: "hi there", Usage: usage11, Success: true},
		{File: "resume1.stdout", SessionID: "01a1fc5c-838c-7a43-9661-c8ed22a94191", Text: "first answer", Usage: usage11, Success: true},
		// Usage is cumulative over the thread: the resumed turn reports both.
		{File: "resume2.stdout", SessionID: "01a1fc5c-838c-7a43-9661-c8ed22a94191", Text: "second answer", Usage: usage22, Success: true},
		{File: "tool.stdout", SessionID: "01a1fc51-e5a0-73f2-8481-da1fadde8e2f", Text: "done: Chunk ID: c5ef03\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 16\nOutput:\npyenv: cannot rehash: /home/user/.pyenv/shims isn't writable\nhello", Usage: usage22, Success: true},
		{File: "tool-fail.stdout", SessionID: "01a1fc52-dd91-7933-93c5-ba1db4534f14", Text: "done: Chunk ID: 617dc7\nWall time: 0.0000 seconds\nProcess exited with code 2\nOriginal token count: 29\nOutput:\npyenv: cannot rehash: /home/user/.pyenv/shims isn't writable\nls: cannot access '/nonexistent': No such", Usage: usage22, Success: true},
		{File: "perm-ww.stdout", SessionID: "01a1fc52-b38b-7333-a844-2569892e550c", Text: "done: Chunk ID: c7855e\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 14\nOutput:\npyenv: cannot rehash: /home/user/.pyenv/shims isn't writable", Usage: usage22, Success: true},
		{File: "rich.stdout", SessionID: "01a1fc62-8199-7bf1-989e-d2ca1d67c63e", Text: "done: Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA hello.txt", Usage: usage22, Success: true},
		// --output-schema: the answer is the agent_message text; codex does
		// not check it against the schema, and a schema file that is not
		// JSON fails before any event.
		{File: "output-schema.stdout", SessionID: "01a20ea8-64c5-7023-8599-1dd2a3d7979f", Text: `{"name":"Ada"}`, Usage: usage11, Success: true},
		{File: "output-schema-mismatch.stdout", SessionID: "01a20ea8-daeb-7072-b773-3c3adbc6972e", Text: "not json at all", Usage: usage11, Success: true},
		// The invalid-schema run (exit 1, nothing on stdout) decodes to no
		// success; its stderr says "Output schema file X is not valid JSON".
		{File: "output-schema-invalid.stdout"},
		{File: "err401.stdout", SessionID: "01a1fc52-fb1c-7501-bda6-dddd07930e64", ErrIs: invoker.ErrAuthRequired,
			StreamErr: "unexpected status 401 Unauthorized: fake 401 error, url: http://127.0.0.1:18084/v1/responses", ErrType: "turn.failed"},
		{File: "err500-noretry.stdout", SessionID: "01a1fc56-7b39-7d20-af52-55d17b8916fe",
			StreamErr: "We’re currently experiencing high demand, which may cause temporary errors.", ErrType: "turn.failed"},
		{File: "2025-simple_greeting_20251216_134103.json", SessionID: "019b25ad-271b-7d93-9738-9bf9e1fc817a",
			Text:  "Hello! I’m GPT-5.2 running in the Codex CLI—an AI coding assistant that can read and edit files in your repo, run terminal commands, and help you debug, implement features, and automate workflows.",
			Usage: invoker.Usage{InputTokens: 8867, OutputTokens: 50}, Success: true},
		{File: "2025-code_analysis_20251216_134157.json", SessionID: "019b25ad-f984-7830-b30d-135a58425c39",
			Usage: invoker.Usage{InputTokens: 40587, OutputTokens: 1238}, Success: true,
			TextPrefix: "Current directory contains a single file:\n\n- `collect_samples.py` (Python 3 script, ~6.4KB, permissions `-rw-------`): runs `codex exec` and/or `gemini -o stream-json` against a few predefined prompts (including "},
	}
	golden.Samples(t, func() driver.Decoder { return newDecoder() }, tests)
}

func TestDecodeItems(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []invoker.EventKind
		check func(t *testing.T, evs []invoker.Event)
	}{
		{
			name: "mcp tool call completed without started",
			lines: []string{
				`{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"}]},"status":"completed"}}`,
			},
			want: []invoker.EventKind{invoker.KindToolCall, invoker.KindToolResult},
			check: func(t *testing.T, evs []invoker.Event) {
				res := evs[1].Tool
				if res.Name != "mcp__docs__search" || res.ID != "item_3" || res.Output != "found" || res.Status != "completed" || string(res.Input) != `{"q":"x"}` {
					t.Errorf("result = %+v", res)
				}
				if evs[0].Tool.Output != "" {
					t.Errorf("call carries output %q", evs[0].Tool.Output)
				}
			},
		},
		{
			name: "mcp tool call error",
			lines: []string{
				`{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"status":"in_progress"}}`,
				`{"type":"item.completed","item":{"id":"i","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"error":{"message":"boom"},"status":"failed"}}`,
			},
			want: []invoker.EventKind{invoker.KindToolCall, invoker.KindToolResult},
			check: func(t *testing.T, evs []invoker.Event) {
				if evs[1].Tool.Output != "boom" || evs[1].Tool.Status != "failed" {
					t.Errorf("result = %+v", evs[1].Tool)
				}
			},
		},
		{
			name: "web search",
			lines: []string{
				`{"type":"item.completed","item":{"id":"ws","type":"web_search","query":"golang generics"}}`,
			},
			want: []invoker.EventKind{invoker.KindToolCall, invoker.KindToolResult},
			check: func(t *testing.T, evs []invoker.Event) {
				if string(evs[1].Tool.Input) != `{"query":"golang generics"}` || evs[1].Tool.Name != "web_search" {
					t.Errorf("result = %+v", evs[1].Tool)
				}
			},
		},
		{
			name: "todo list started, updated, completed",
			lines: []string{
				`{"type":"item.started","item":{"id":"td","type":"todo_list","items":[{"text":"a","completed":false},{"text":"b","completed":false}]}}`,
				`{"type":"item.updated","item":{"id":"td","type":"todo_list","items":[{"text":"a","completed":true},{"text":"b","completed":false}]}}`,
				`{"type":"item.completed","item":{"id":"td","type":"todo_list","items":[{"text":"a","completed":true},{"text":"b","completed":true}]}}`,
			},
			want: []invoker.EventKind{invoker.KindToolCall, invoker.KindToolCall, invoker.KindToolResult},
			check: func(t *testing.T, evs []invoker.Event) {
				if string(evs[1].Tool.Input) != `{"items":[{"text":"a","completed":true},{"text":"b","completed":false}]}` || evs[1].Tool.Output != "" {
					t.Errorf("update = %+v", evs[1].Tool)
				}
				if evs[2].Tool.Output != "[x] a\n[x] b\n" {
					t.Errorf("result output = %q", evs[2].Tool.Output)
				}
			},
		},
		{
			name: "file change",
			lines: []string{
				`{"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"/p/a.go","kind":"update"}],"status":"completed"}}`,
			},
			want: []invoker.EventKind{invoker.KindToolCall, invoker.KindToolResult},
			check: func(t *testing.T, evs []invoker.Event) {
				if evs[1].Tool.Output != "update /p/a.go\n" || string(evs[1].Tool.Input) != `{"changes":[{"path":"/p/a.go","kind":"update"}]}` {
					t.Errorf("result = %+v", evs[1].Tool)
				}
			},
		},
		{
			name:  "unknown item and unknown event pass through",
			lines: []string{`{"type":"item.completed","item":{"id":"x","type":"hologram"}}`, `{"type":"thread.archived"}`},
			want:  []invoker.EventKind{invoker.KindRaw, invoker.KindRaw},
		},
		{
			name:  "malformed lines are warnings",
			lines: []string{`not json`, `[1,2]`, `{"type":"item.completed","item":"oops"}`, "\xff\xfe{"},
			want:  []invoker.EventKind{invoker.KindWarning, invoker.KindWarning, invoker.KindWarning, invoker.KindWarning},
			check: func(t *testing.T, evs []invoker.Event) {
				if evs[0].Raw != nil || evs[3].Raw != nil {
					t.Errorf("invalid JSON kept as Raw")
				}
				if string(evs[1].Raw) != `[1,2]` {
					t.Errorf("valid JSON not kept: %s", evs[1].Raw)
				}
			},
		},
		{
			name:  "lines that carry nothing give no event",
			lines: []string{`{"type":"turn.started"}`, `{"type":"item.started","item":{"id":"m","type":"agent_message","text":""}}`, `{"type":"item.started","item":{"id":"r","type":"reasoning","text":""}}`},
			want:  nil,
		},
		{
			name:  "item event without item",
			lines: []string{`{"type":"item.started"}`},
			want:  []invoker.EventKind{invoker.KindWarning},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := golden.DecodeAll(t, newDecoder(), tt.lines...)
			if got := golden.Kinds(evs); !slices.Equal(got, tt.want) {
				t.Fatalf("kinds = %v, want %v", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, evs)
			}
		})
	}
}

func TestOutcomeWithoutTerminalEvent(t *testing.T) {
	started := []string{
		`{"type":"thread.started","thread_id":"T"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"partial"}}`,
	}
	tests := []struct {
		name     string
		lines    []string
		exitCode int
		stderr   string
		wantErr  string // substring of Err's message; "" means nil
		wantIs   error
	}{
		{name: "SIGINT exit 1 keeps partial text, error left to the engine", lines: started, exitCode: 1},
		{name: "killed", lines: started, exitCode: -1},
		{name: "exit 0 without turn.completed", lines: started, exitCode: 0},
		{name: "retry notices only", lines: append(started[:2:2], `{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}`), exitCode: 1},
		{name: "error line before any turn", lines: []string{`{"type":"error","message":"invalid value for sandbox_mode"}`}, exitCode: 1, wantErr: "invalid value for sandbox_mode"},
		{name: "usage error", exitCode: 2, stderr: "error: unexpected argument '--full-auto' found\n", wantErr: "usage error"},
		{name: "panic", exitCode: 101, wantErr: "panicked"},
		{name: "empty prompt", exitCode: 1, stderr: "No prompt provided via stdin.\n", wantErr: "empty prompt"},
		{name: "rate limited turn", lines: []string{`{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`}, exitCode: 1, wantErr: "429", wantIs: invoker.ErrRateLimited},
		{name: "turn.failed without a message uses the last error", lines: []string{`{"type":"error","message":"stream error: unexpected status 401 Unauthorized"}`, `{"type":"turn.failed","error":{}}`}, exitCode: 1, wantErr: "401", wantIs: invoker.ErrAuthRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			golden.DecodeAll(t, d, tt.lines...)
			out := d.Outcome(tt.exitCode, tt.stderr)
			if out.Success {
				t.Errorf("Success = true, want false")
			}
			if len(tt.lines) > 2 && tt.lines[2] == started[2] && out.Text != "partial" {
				t.Errorf("Text = %q, want the partial text", out.Text)
			}
			switch {
			case tt.wantErr == "" && out.Err != nil:
				t.Errorf("Err = %v, want nil", out.Err)
			case tt.wantErr != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want it to mention %q", out.Err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(out.Err, tt.wantIs) {
				t.Errorf("Err = %v, want errors.Is %v", out.Err, tt.wantIs)
			}
		})
	}
}

// A turn stopped while a message was in progress returns the text the
// stream showed, not "": the message in progress is the latest text, and
// reasoning is never the answer.
func TestPartialTextOfAMessageInProgress(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"message in progress", []string{
			`{"type":"thread.started","thread_id":"T"}`,
			`{"type":"item.completed","item":{"id":"r0","type":"reasoning","text":"**Thinking**"}}`,
			`{"type":"item.updated","item":{"id":"m0","type":"agent_message","text":"The answer is"}}`,
		}, "The answer is"},
		{"a completed message, then one in progress", []string{
			`{"type":"item.completed","item":{"id":"m0","type":"agent_message","text":"Looking."}}`,
			`{"type":"item.started","item":{"id":"m1","type":"agent_message","text":"Found it"}}`,
		}, "Found it"},
		{"a message in progress, then completed", []string{
			`{"type":"item.updated","item":{"id":"m0","type":"agent_message","text":"Fou"}}`,
			`{"type":"item.completed","item":{"id":"m0","type":"agent_message","text":"Found it."}}`,
		}, "Found it."},
		{"reasoning only", []string{
			`{"type":"item.completed","item":{"id":"r0","type":"reasoning","text":"**Thinking**"}}`,
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			golden.DecodeAll(t, d, tt.lines...)
			if out := d.Outcome(1, ""); out.Text != tt.want {
				t.Errorf("Outcome(1).Text = %q, want %q", out.Text, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		msg  string
		want error
	}{
		{"unexpected status 401 Unauthorized: fake 401 error", invoker.ErrAuthRequired},
		{"Incorrect API key provided", invoker.ErrAuthRequired},
		{"exceeded retry limit, last status: 429 Too Many Requests", invoker.ErrRateLimited},
		{"You've hit your usage limit. Upgrade to Pro", invoker.ErrRateLimited},
		{"We’re currently experiencing high demand, which may cause temporary errors.", nil},
		{"read 4010 bytes", nil},
	}
	for _, tt := range tests {
		if got := classify(tt.msg); got != tt.want {
			t.Errorf("classify(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
}
