package claude

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
	u := func(in, out int64, cost float64) invoker.Usage {
		return invoker.Usage{InputTokens: in, OutputTokens: out, CostUSD: cost}
	}
	const touched = "done: touch in '/home/user/project/claude-touched.txt' was blocked. For security, Claude Code may only create or modify files in the allowed working directories for this session: '/home/user/project'."
	tests := []golden.Want{
		{File: "basic.stdout", SessionID: "839655c4-4158-4da3-838d-5c4547fa9f6b", Text: "hi there", Usage: u(11, 5, 0.00017999999999999998), Success: true},
		{File: "rich.stdout", SessionID: "ac7ba848-6cbb-40b4-a1b2-ee07f14340e6", Text: "hi there", Usage: u(11, 5, 0.00017999999999999998), Success: true},
		{File: "partial.stdout", SessionID: "20285f31-d4a9-4fad-9e22-4d0c64302571", Text: "hi there", Usage: u(11, 5, 0.00017999999999999998), Success: true},
		{File: "json.stdout", SessionID: "e816664c-6d1b-4451-b62b-3ddad061f8d9", Text: "hi there", Usage: u(11, 5, 0.00017999999999999998), Success: true},
		{File: "resume1.stdout", SessionID: "e1874291-bd81-4c92-84cf-6317b67dbd1e", Text: "first answer", Usage: u(11, 5, 0.00035999999999999997), Success: true},
		{File: "resume2.stdout", SessionID: "e1874291-bd81-4c92-84cf-6317b67dbd1e", Text: "second answer", Usage: u(11, 5, 0.00017999999999999998), Success: true},
		{File: "tool-default.stdout", SessionID: "4255c568-1706-4247-8e02-2463ccfacb9f", Text: "done: hello", Usage: u(22, 10, 0.0005399999999999999), Success: true},
		{File: "tool-touch.stdout", SessionID: "80cbad97-5a4e-42bd-b7db-46f85d03b902", Text: touched, Usage: u(22, 10, 0.0005399999999999999), Success: true},
		{File: "perm-default.stdout", SessionID: "4ae65e09-3ce9-491b-9e93-7149f1beb17f", TextPrefix: "done: touch in '/home/user/project/claude-touched-default.txt' was blocked.", Usage: u(22, 10, 0.0005399999999999999), Success: true},
		{File: "maxturns.stdout", ExitCode: 1, SessionID: "6dd54ba7-954d-4ea3-aaef-56c7279628ac", Usage: u(11, 5, 0.00017999999999999998),
			StreamErr: "Reached maximum number of turns (1)", ErrType: "error_max_turns", Limit: "MaxTurns", Turns: 2},
		// --json-schema answered in plain text twice: claude gives up and
		// reports success without a structured answer.
		{File: "json-schema-text.stdout", SessionID: "94c6bbed-32a3-447b-8539-a906df184863", Text: `{"name":"Ada"}`, Usage: u(22, 10, 0.00035999999999999997), Success: true, Turns: 2},
		// --json-schema answered through the StructuredOutput tool: the
		// result carries structured_output, and result holds it as text.
		{File: "json-schema.stdout", SessionID: "9866273b-2f92-4901-8afa-b5394c744dd8", Text: `{"name":"Ada"}`, Usage: u(11, 5, 0.00017999999999999998), Success: true,
			Turns: 2, Structured: `{"name":"Ada"}`},
		{File: "max-turns-1.stdout", SessionID: "557f1bee-86d7-4f4f-a2ef-c2eb1935f590", Usage: u(11, 5, 0.00017999999999999998),
			StreamErr: "Reached maximum number of turns (1)", ErrType: "error_max_turns", Limit: "MaxTurns", Turns: 2},
		{File: "max-budget.stdout", SessionID: "99dca95a-2f65-4336-af38-3f9ff20b83c4",
			StreamErr: "Reached maximum budget ($0.000001)", ErrType: "error_max_budget_usd", Limit: "MaxBudgetUSD", Turns: 1},
		// API errors: exit 1 and a result of subtype "success" with is_error.
		{File: "err401-noretry.stdout", SessionID: "c6157886-e725-4315-8f97-73a1cd19d748", ErrIs: invoker.ErrAuthRequired,
			StreamErr: "Failed to authenticate. API Error: 401 fake 401 error", ErrType: "authentication_failed"},
		{File: "err500-noretry.stdout", SessionID: "73e0a11b-ece6-4acd-9580-8c61ea34e585",
			StreamErr: "API Error: 500 fake 500 error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18081).", ErrType: "server_error"},
		{File: "2025-simple_greeting_20251216_141901.json", SessionID: "16cdb7ae-cabd-47ad-ad30-4efd2ce48b01", TextPrefix: "Hello! 👋\n\nI'm Claude, your AI software engineering assistant running in Claude Code.", Success: true},
		{File: "2025-list_files_20251216_141959.json", SessionID: "77d32f05-4a4a-47a4-9797-64292bea680c", TextPrefix: "Here are the files and directories in the current directory", Success: true},
		// Missing --verbose: exit 1, nothing on stdout.
		{File: "2025-simple_greeting_20251216_141839.json", ExitErr: "needs --verbose"},
	}
	golden.Samples(t, func() driver.Decoder { return newDecoder() }, tests)
}

const sid = `"session_id":"S"`

func TestPartialText(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"text then a tool call keeps the text", []string{
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Let me look."}]},"parent_tool_use_id":null,` + sid + `}`,
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},"parent_tool_use_id":null,` + sid + `}`,
		}, "Let me look."},
		{"a later message replaces it", []string{
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"first"}]},` + sid + `}`,
			`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"second"}]},` + sid + `}`,
		}, "second"},
		{"blocks of one message concatenate", []string{
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a"}]},` + sid + `}`,
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"b"}]},` + sid + `}`,
		}, "ab"},
		{"subagent text is not the answer", []string{
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"main"}]},"parent_tool_use_id":null,` + sid + `}`,
			`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"sub"}]},"parent_tool_use_id":"toolu_1",` + sid + `}`,
		}, "main"},
		{"deltas of a message still streaming", []string{
			`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"before"}]},` + sid + `}`,
			`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m2"}},` + sid + `}`,
			`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hal"}},` + sid + `}`,
			`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"f"}},` + sid + `}`,
		}, "half"},
		{"a whole block supersedes its deltas", []string{
			`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m2"}},` + sid + `}`,
			`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"whole"}},` + sid + `}`,
			`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"whole"}]},` + sid + `}`,
		}, "whole"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			golden.DecodeAll(t, d, tt.lines...)
			out := d.Outcome(0, "")
			if out.Success || out.Err != nil {
				t.Errorf("Outcome without result = %+v, want failure with nil Err", out)
			}
			if out.Text != tt.want || out.SessionID != "S" {
				t.Errorf("Text, SessionID = %q, %q, want %q, S", out.Text, out.SessionID, tt.want)
			}
		})
	}
}

func TestDecodeEvents(t *testing.T) {
	d := newDecoder()
	evs := golden.DecodeAll(t, d,
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded_error",`+sid+`}`,
		`{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"error_status":null,"error":{"type":"connection"},`+sid+`}`,
		`{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"hmm"},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a"}}]},`+sid+`}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"line1"},{"type":"image"}],"is_error":false}]},`+sid+`}`,
		`{"type":"user","message":{"role":"user","content":"a plain prompt"},`+sid+`}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"th"}},`+sid+`}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{"}},`+sid+`}`,
		`{"type":"system","subtype":"status","status":"requesting",`+sid+`}`,
		`{"type":"rate_limit_event",`+sid+`}`,
		`Error: something`,
	)
	want := []invoker.EventKind{invoker.KindWarning, invoker.KindWarning, invoker.KindReasoning, invoker.KindToolCall,
		invoker.KindToolResult, invoker.KindRaw, invoker.KindDelta, invoker.KindRaw, invoker.KindRaw, invoker.KindRaw, invoker.KindWarning}
	if !slices.Equal(golden.Kinds(evs), want) {
		t.Fatalf("kinds = %v, want %v", golden.Kinds(evs), want)
	}
	if evs[0].Text != "API retry 1/10 (status 529): overloaded_error" || evs[1].Text != `API retry 2/10: {"type":"connection"}` {
		t.Errorf("retry texts = %q, %q", evs[0].Text, evs[1].Text)
	}
	if r := evs[4].Tool; r.Name != "Read" || r.ID != "t1" || string(r.Input) != `{"file_path":"/a"}` || r.Output != "line1" || r.Status != "success" {
		t.Errorf("tool result = %+v", r)
	}
	if evs[6].Kind != invoker.KindDelta || evs[6].Delta != invoker.KindReasoning || evs[6].Text != "th" {
		t.Errorf("thinking delta = %+v", evs[6])
	}
	for _, ev := range evs[:10] {
		if ev.SessionID != "S" {
			t.Errorf("%v event SessionID = %q, want S", ev.Kind, ev.SessionID)
		}
	}
}

func TestOutcomeFailures(t *testing.T) {
	tests := []struct {
		name     string
		lines    []string
		exitCode int
		stderr   string
		want     string
		is       error
	}{
		{name: "not logged in", exitCode: 1, lines: []string{`{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login",` + sid + `}`}, want: "Not logged in", is: invoker.ErrAuthRequired},
		{name: "invalid api key", exitCode: 1, lines: []string{`{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login",` + sid + `}`}, want: "Invalid API key", is: invoker.ErrAuthRequired},
		{name: "rate limited", exitCode: 1, lines: []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 slow down",` + sid + `}`}, want: "429", is: invoker.ErrRateLimited},
		{name: "interrupted", exitCode: 0, lines: []string{`{"type":"result","subtype":"error_during_execution","is_error":true,` + sid + `}`}, want: "error_during_execution"},
		{name: "empty result after a broken stream", exitCode: 0, lines: []string{`{"type":"system","subtype":"init",` + sid + `}`, `{"type":"result","subtype":"success","is_error":false,"result":"",` + sid + `}`}, want: "empty result"},
		{name: "nested session refused", exitCode: 1, stderr: "Error: Claude Code cannot be launched inside another Claude Code session.\n", want: "CLAUDECODE"},
		{name: "unknown session", exitCode: 1, stderr: "No conversation found with session ID: x\n", want: "resume in the Workdir"},
		{name: "root bypass", exitCode: 1, stderr: "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n", want: "IS_SANDBOX=1"},
		{name: "plain exit 1", exitCode: 1},
		{name: "SIGTERM", exitCode: 143, want: "SIGTERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			golden.DecodeAll(t, d, tt.lines...)
			out := d.Outcome(tt.exitCode, tt.stderr)
			if out.Success {
				t.Errorf("Success = true")
			}
			switch {
			case tt.want == "" && out.Err != nil:
				t.Errorf("Err = %v, want nil", out.Err)
			case tt.want != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.want)):
				t.Errorf("Err = %v, want it to mention %q", out.Err, tt.want)
			}
			if tt.is != nil && !errors.Is(out.Err, tt.is) {
				t.Errorf("Err = %v, want errors.Is %v", out.Err, tt.is)
			}
			if out.Text != "" {
				t.Errorf("Text = %q: an error message is not the answer", out.Text)
			}
		})
	}
}

// docs/cli-facts.md, "stream ended badly": exit 0 with an empty result. After a tool
// call the turn is not over, so that is a failure keeping the partial text;
// a turn the model ended (stop_reason end_turn) with no text is a success.
func TestEmptyResult(t *testing.T) {
	const sid = `"session_id":"S"`
	lines := []string{
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Running the tests."}]},"parent_tool_use_id":null,` + sid + `}`,
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test"}}]},"parent_tool_use_id":null,` + sid + `}`,
	}
	tests := []struct {
		name        string
		result      string
		wantSuccess bool
		wantText    string
	}{
		{"stream broke after a tool call", `{"type":"result","subtype":"success","is_error":false,"result":"","stop_reason":null,` + sid + `}`, false, "Running the tests."},
		{"model ended the turn without text", `{"type":"result","subtype":"success","is_error":false,"result":"","stop_reason":"end_turn",` + sid + `}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			golden.DecodeAll(t, d, append(lines, tt.result)...)
			out := d.Outcome(0, "")
			if out.Success != tt.wantSuccess || out.Text != tt.wantText {
				t.Errorf("Outcome = {Success:%v Text:%q Err:%v}, want {Success:%v Text:%q}", out.Success, out.Text, out.Err, tt.wantSuccess, tt.wantText)
			}
			var se *invoker.StreamError
			if !tt.wantSuccess && (!errors.As(out.Err, &se) || se.Type != "empty_result") {
				t.Errorf("Outcome.Err = %v, want an empty_result *StreamError", out.Err)
			}
		})
	}
}

// The diagnostic Claude Code prints in the result of every turn it aborted
// is a warning, not an error event: the interrupt ended the turn. Any
// other failure of an aborted turn stays an error.
func TestInterruptDiagnosticIsAWarning(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want invoker.EventKind
	}{
		{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use", invoker.KindWarning},
		{"Request was aborted.", invoker.KindError},
	} {
		evs := golden.DecodeAll(t, newDecoder(),
			`{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"errors":["`+tt.msg+`"],`+sid+`}`)
		if kinds := golden.Kinds(evs); !slices.Contains(kinds, tt.want) || (tt.want == invoker.KindWarning && slices.Contains(kinds, invoker.KindError)) {
			t.Errorf("%q: kinds = %v, want a %v event", tt.msg, kinds, tt.want)
		}
	}
}
