package gemini

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
	usage16 := invoker.Usage{InputTokens: 11, OutputTokens: 5, TotalTokens: 16}
	tests := []golden.Want{
		{File: "basic.stdout", SessionID: "e6ed8a6d-d976-4d02-882b-99e6aeadc6b8", Text: "hi there",
			Usage: invoker.Usage{InputTokens: 22, OutputTokens: 10, TotalTokens: 32}, Success: true},
		{File: "rich.stdout", SessionID: "2465bd43-0609-4213-94f8-b68ffb8673d1", Text: "hi there", Usage: usage16, Success: true},
		{File: "resume1.stdout", SessionID: "5e59c07d-7065-4197-ac62-4056d87dfa14", Text: "first answer", Usage: usage16, Success: true},
		{File: "resume2.stdout", SessionID: "5e59c07d-7065-4197-ac62-4056d87dfa14", Text: "second answer", Usage: usage16, Success: true},
		{File: "tool.stdout", SessionID: "8f1c1029-ec0a-4967-b52d-79fb2326e536",
			Text:  "done: {\"output\": \"<untrusted_context>\\nOutput: hello\\nProcess Group PGID: 12446\\n</untrusted_context>\"}",
			Usage: invoker.Usage{InputTokens: 22, OutputTokens: 10, TotalTokens: 32}, Success: true},
		{File: "toolforce.stdout", SessionID: "0d3680fb-8242-47d4-8d09-1947c47388a3",
			Text:  "done: {\"error\": \"Tool \\\"run_shell_command\\\" not found. Did you mean one of: \\\"update_topic\\\", \\\"grep_search\\\", \\\"invoke_agent\\\"?\"}",
			Usage: invoker.Usage{InputTokens: 22, OutputTokens: 10, TotalTokens: 32}, Success: true},
		// Gemini exits 0 here although the stream failed.
		{File: "variant-no-finishReason.stdout", SessionID: "a8f515cb-a103-45d0-bafd-18f2b71644df", Text: "hi there",
			StreamErr: "Model stream ended without a finish reason."},
		{File: "err401-noretry.stdout", ExitCode: 145, SessionID: "9c99e36c-c3ea-4900-9a2e-986bf8e3f1fa", ErrIs: invoker.ErrAuthRequired,
			StreamErr: `[API Error: {"error":{"code":401,"message":"fake 401 error","status":"UNAUTHENTICATED"}}]`, ErrType: "unknown"},
		{File: "err429-noretry.stdout", ExitCode: 173, SessionID: "e0efe640-8f7e-4352-809b-3f744501fd0b", ErrIs: invoker.ErrRateLimited,
			StreamErr: "[API Error: fake 429 error]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method", ErrType: "unknown"},
		// A 429 whose google.rpc.RetryInfo says 2s (general.maxAttempts 1).
		{File: "err429-retryinfo.stdout", SessionID: "dcbdd5b0-d731-4188-b43f-3c3e6cbe1cfa", ErrIs: invoker.ErrRateLimited,
			StreamErr: "[API Error: Resource has been exhausted (e.g. check quota).\nSuggested retry after 2s.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method", ErrType: "unknown"},
		// The same 429 retried once (general.maxAttempts 2), then answered.
		{File: "retry429.stdout", SessionID: "8e5c1775-27df-4360-9c8f-f3ce345b1510", Text: "after retry", Usage: usage16, Success: true},
		{File: "retry429-plain.stdout", SessionID: "a1947082-332c-449b-9e44-73b5ddd46deb", Text: "after retry", Usage: usage16, Success: true},
		{File: "text-then-tool.stdout", SessionID: "7c9a0da1-4e0f-469e-8866-4f5b880cfdc7", Text: "let me look \n\nit said hi",
			Usage: invoker.Usage{InputTokens: 22, OutputTokens: 10, TotalTokens: 32}, Success: true},
		{File: "err500-noretry.stdout", ExitCode: 244, SessionID: "6ad46466-2bf7-4578-bf8a-a41755d92ed0",
			StreamErr: `[API Error: {"error":{"code":500,"message":"fake 500 error","status":"INTERNAL"}}]`, ErrType: "unknown"},
		// settings model.maxSessionTurns 1 with a tool call: exit 53 and a
		// result of status "error".
		{File: "max-session-turns-1.stdout", SessionID: "954b732b-3c17-4c34-a0c8-696529cd0e53",
			StreamErr: "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.", ErrType: "FatalTurnLimitedError", Limit: "MaxTurns"},
		// The output of -o json, not stream-json: nothing decodes, nothing succeeds.
		{File: "json.stdout"},
		{File: "2025-simple_greeting_20251216_134103.json", SessionID: "d6336abb-88c7-496e-bec4-adca188152b4",
			Text:  "Hello. I am the Gemini CLI agent, a specialized software engineering assistant designed to help you efficiently with your coding tasks. I am ready to assist you.",
			Usage: invoker.Usage{InputTokens: 5846, OutputTokens: 31, TotalTokens: 6195}, Success: true},
		// Exit status 144 = HTTP 400.
		{File: "2025-code_analysis_20251216_134157.json", SessionID: "e7655b27-a825-4e3d-94e9-2c43a1f676b1",
			Usage:     invoker.Usage{InputTokens: 5852, OutputTokens: 11, TotalTokens: 5972},
			StreamErr: `[API Error: {"error":{"message":"{\"error\":{\"message\":\"Invalid JSON payload received. Unknown name \\\"id\\\" at 'contents[3].parts[0].function_response': Cannot find field.\",\"type\":\"upstream_error\",\"param\":\"\",\"code\":400}}","code":400,"status":"Bad Request"}}]`, ErrType: "Error"},
	}
	golden.Samples(t, func() driver.Decoder { return newDecoder() }, tests)
}

func TestToolResultCarriesCall(t *testing.T) {
	d := newDecoder()
	evs := golden.DecodeAll(t, d,
		`{"type":"tool_use","tool_name":"read_file","tool_id":"r1","parameters":{"path":"a.go"}}`,
		`{"type":"tool_use","tool_name":"glob","tool_id":"g1","parameters":{"pattern":"*"}}`,
		`{"type":"tool_result","tool_id":"r1","status":"error","error":{"type":"file_not_found","message":"no such file"}}`,
		`{"type":"tool_result","tool_id":"g1","status":"success","output":"Found 2 files"}`,
		`{"type":"tool_result","tool_id":"unknown","status":"success","output":"x"}`,
	)
	want := []invoker.EventKind{invoker.KindToolCall, invoker.KindToolCall, invoker.KindToolResult, invoker.KindToolResult, invoker.KindToolResult}
	if !slices.Equal(golden.Kinds(evs), want) {
		t.Fatalf("kinds = %v, want %v", golden.Kinds(evs), want)
	}
	r := evs[2].Tool
	if r.Name != "read_file" || r.ID != "r1" || string(r.Input) != `{"path":"a.go"}` || r.Output != "no such file" || r.Status != "error" {
		t.Errorf("result = %+v", r)
	}
	if g := evs[3].Tool; g.Name != "glob" || g.Output != "Found 2 files" || g.Status != "success" {
		t.Errorf("result = %+v", g)
	}
	if u := evs[4].Tool; u.Name != "" || u.ID != "unknown" {
		t.Errorf("result of an unknown call = %+v", u)
	}
}

func TestDecodeMisc(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []invoker.EventKind
	}{
		{"warning severity", []string{`{"type":"error","severity":"warning","message":"Loop detected"}`}, []invoker.EventKind{invoker.KindWarning}},
		{"user echo carries nothing", []string{`{"type":"message","role":"user","content":"hi"}`}, nil},
		{"unknown type", []string{`{"type":"thought","content":"x"}`}, []invoker.EventKind{invoker.KindRaw}},
		{"malformed", []string{`{`, `Warning: 256-color support not detected.`, `42`}, []invoker.EventKind{invoker.KindWarning, invoker.KindWarning, invoker.KindWarning}},
		{"non-delta message", []string{`{"type":"message","role":"assistant","content":"whole"}`}, []invoker.EventKind{invoker.KindMessage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := golden.Kinds(golden.DecodeAll(t, newDecoder(), tt.lines...)); !slices.Equal(got, tt.want) {
				t.Errorf("kinds = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoginStall(t *testing.T) {
	for _, l := range []string{
		"Waiting for authentication...",
		"Please visit the following URL to authorize the application:",
		"Enter the authorization code: ",
		"\x1b[2J\x1b[HAttempting to open authentication page in your browser.",
	} {
		if err := newDecoder().Stderr([]byte(l)); !errors.Is(err, invoker.ErrAuthRequired) {
			t.Errorf("Stderr(%q) = %v, want ErrAuthRequired", l, err)
		}
		if _, err := newDecoder().Decode([]byte(l)); !errors.Is(err, invoker.ErrAuthRequired) {
			t.Errorf("Decode(%q) = %v, want ErrAuthRequired", l, err)
		}
	}
	// Normal noise, including an API error's stack trace, is not fatal.
	for _, l := range []string{
		"Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience.",
		"YOLO mode is enabled. All tool calls will be automatically approved.",
		`Error when talking to Gemini API Full report available at: $TMPDIR/gemini-client-error.json _ApiError: {"error":{"code":401,"message":"fake 401 error","status":"UNAUTHENTICATED"}}`,
		"Attempt 1 failed: fake 429 error. Max attempts reached",
		// A tool's output that mentions a prompt, copied to stderr.
		"Error executing tool run_shell_command: grep found: Waiting for authentication...",
	} {
		if err := newDecoder().Stderr([]byte(l)); err != nil {
			t.Errorf("Stderr(%q) = %v, want nil", l, err)
		}
	}
}

func TestOutcomeExitCodes(t *testing.T) {
	tests := []struct {
		code   int
		stderr string
		want   string // in the error message; "" means Err is nil
		is     error
	}{
		{code: 0},
		{code: -1},
		{code: 1},
		{code: 41, stderr: "Please set an Auth method in your settings.json\n", want: "authentication is not configured", is: invoker.ErrAuthRequired},
		{code: 42, want: "input error"},
		{code: 53, stderr: `{"error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session.","code":53}}` + "\n", want: "turn limit (model.maxSessionTurns): Reached max session turns"},
		{code: 55, want: "--skip-trust"},
		{code: 145, want: "HTTP 401", is: invoker.ErrAuthRequired},
		{code: 173, want: "HTTP 429", is: invoker.ErrRateLimited},
		{code: 244, want: "HTTP 500"},
		{code: 144, want: "HTTP 400"},
	}
	for _, tt := range tests {
		d := newDecoder()
		golden.DecodeAll(t, d, `{"type":"init","session_id":"S","model":"m"}`, `{"type":"message","role":"assistant","content":"part","delta":true}`)
		out := d.Outcome(tt.code, tt.stderr)
		if out.Success || out.SessionID != "S" || out.Text != "part" {
			t.Errorf("exit %d: Outcome = %+v", tt.code, out)
		}
		switch {
		case tt.want == "" && out.Err != nil:
			t.Errorf("exit %d: Err = %v, want nil", tt.code, out.Err)
		case tt.want != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.want)):
			t.Errorf("exit %d: Err = %v, want it to mention %q", tt.code, out.Err, tt.want)
		}
		if tt.want != "" {
			var ee *invoker.ExitError
			if !errors.As(out.Err, &ee) || ee.ExitCode != tt.code {
				t.Errorf("exit %d: Err = %v, want an *ExitError with the code", tt.code, out.Err)
			}
		}
		if tt.is != nil && !errors.Is(out.Err, tt.is) {
			t.Errorf("exit %d: Err = %v, want errors.Is %v", tt.code, out.Err, tt.is)
		}
	}
}

// Assistant messages separated by a tool call are kept apart in the final
// text; the deltas of one message are concatenated.
func TestTextAcrossToolCalls(t *testing.T) {
	d := newDecoder()
	golden.DecodeAll(t, d,
		`{"type":"init","session_id":"S","model":"m"}`,
		`{"type":"message","role":"assistant","content":"I'll run ","delta":true}`,
		`{"type":"message","role":"assistant","content":"the tests.","delta":true}`,
		`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"go test"}}`,
		`{"type":"tool_result","tool_id":"t1","status":"success","output":"ok"}`,
		`{"type":"message","role":"assistant","content":"All ","delta":true}`,
		`{"type":"message","role":"assistant","content":"pass.","delta":true}`,
		`{"type":"result","status":"success","stats":{}}`,
	)
	if got, want := d.Outcome(0, "").Text, "I'll run the tests.\n\nAll pass."; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}
