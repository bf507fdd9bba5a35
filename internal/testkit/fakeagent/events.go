package fakeagent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A flavour prints the events of one CLI. Shapes are copied from the
// captures in cli-samples/recorded-2026-11 (see testdata/), field order
// included.
type flavour interface {
	begin(a *agent)                         // session events
	tool(a *agent)                          // a shell tool call and its result
	progress(a *agent, k int)               // the k-th progress event
	huge(a *agent, size int)                // a tool result line of size bytes
	chunk(a *agent, pieces []string, i int) // the i-th piece of the answer
	failAnswer(a *agent)                    // what precedes a failure's terminal event
	done(a *agent)                          // the terminal success event
	fail(a *agent)                          // the terminal failure event
}

func flavourOf(name string) flavour {
	switch name {
	case Gemini:
		return gemini{}
	case Claude:
		return claude{}
	}
	return codex{}
}

// tokens is the fake's token count for s.
func tokens(s string) int { return 1 + len(s)/4 }

const (
	toolCommand = "echo hello"
	toolOutput  = "hello"
	hugeCommand = "cat big.txt"
)

// ---- Codex: `codex exec --json` ----

type codex struct{}

func (a *agent) itemID() string {
	id := "item_" + strconv.Itoa(a.ids)
	a.ids++
	return id
}

func (codex) begin(a *agent) {
	a.emit(obj{{"type", "thread.started"}, {"thread_id", a.sid}})
	a.emit(obj{{"type", "turn.started"}})
}

func codexCommand(a *agent, command, output string, huge int) {
	id := a.itemID()
	cmd := "/bin/bash -lc '" + command + "'"
	a.emit(obj{{"type", "item.started"}, {"item", obj{
		{"id", id}, {"type", "command_execution"}, {"command", cmd},
		{"aggregated_output", ""}, {"exit_code", nil}, {"status", "in_progress"},
	}}})
	ev := obj{{"type", "item.completed"}, {"item", obj{
		{"id", id}, {"type", "command_execution"}, {"command", cmd},
		{"aggregated_output", output}, {"exit_code", 0}, {"status", "completed"},
	}}}
	if huge > 0 {
		a.out.line(withFiller(ev, huge))
		return
	}
	a.emit(ev)
}

func (codex) tool(a *agent) {
	id := a.itemID()
	cmd := "/bin/bash -lc '" + a.toolLine() + "'"
	a.emit(obj{{"type", "item.started"}, {"item", obj{
		{"id", id}, {"type", "command_execution"}, {"command", cmd},
		{"aggregated_output", ""}, {"exit_code", nil}, {"status", "in_progress"},
	}}})
	t := a.runTool()
	status := "completed"
	if t.failed {
		status = "failed"
	}
	a.emit(obj{{"type", "item.completed"}, {"item", obj{
		{"id", id}, {"type", "command_execution"}, {"command", cmd},
		{"aggregated_output", t.output + "\n"}, {"exit_code", t.code}, {"status", status},
	}}})
}

func (codex) huge(a *agent, size int) { codexCommand(a, hugeCommand, fillerMark, size) }

func (codex) progress(a *agent, k int) {
	a.emit(obj{{"type", "item.completed"}, {"item", obj{
		{"id", a.itemID()}, {"type", "reasoning"},
		{"text", "**Working** step " + strconv.Itoa(k+1) + "."},
	}}})
}

// chunk prints a growing prefix of the answer: Codex's final answer is its
// last agent_message, so the last one must hold all of it.
func (codex) chunk(a *agent, pieces []string, i int) {
	a.emit(obj{{"type", "item.completed"}, {"item", obj{
		{"id", a.itemID()}, {"type", "agent_message"},
		{"text", strings.Join(pieces[:i+1], "")},
	}}})
}

func (codex) failAnswer(a *agent) {
	a.emit(obj{{"type", "error"}, {"message", a.s.Fail}})
}

func (codex) done(a *agent) {
	a.emit(obj{{"type", "turn.completed"}, {"usage", obj{
		{"input_tokens", tokens(a.prompt)}, {"cached_input_tokens", 0},
		{"cache_write_input_tokens", 0}, {"output_tokens", tokens(a.s.answer())},
		{"reasoning_output_tokens", 0},
	}}})
}

func (codex) fail(a *agent) {
	a.emit(obj{{"type", "turn.failed"}, {"error", obj{{"message", a.s.Fail}}}})
}

// ---- Gemini: `gemini -o stream-json` ----

type gemini struct{}

func timestamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func (a *agent) geminiModel() string {
	if m, ok := flagValue(a.args, "-m", "--model"); ok {
		return m
	}
	return "auto"
}

func (gemini) begin(a *agent) {
	a.emit(obj{{"type", "init"}, {"timestamp", timestamp()}, {"session_id", a.sid}, {"model", a.geminiModel()}})
	a.emit(obj{{"type", "message"}, {"timestamp", timestamp()}, {"role", "user"}, {"content", a.prompt}})
}

func (a *agent) geminiToolID(name string) string {
	id := name + "__" + name + "_" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "_" + strconv.Itoa(a.ids)
	a.ids++
	a.tools++
	return id
}

func geminiToolUse(a *agent, name, id string, params obj) {
	a.emit(obj{{"type", "tool_use"}, {"timestamp", timestamp()}, {"tool_name", name}, {"tool_id", id}, {"parameters", params}})
}

func geminiToolResult(id, output string) obj {
	return obj{{"type", "tool_result"}, {"timestamp", timestamp()}, {"tool_id", id}, {"status", "success"}, {"output", output}}
}

func (gemini) tool(a *agent) {
	id := a.geminiToolID("run_shell_command")
	geminiToolUse(a, "run_shell_command", id, obj{{"command", a.toolLine()}, {"description", "run a command"}})
	t := a.runTool()
	res := geminiToolResult(id, t.output)
	if t.failed {
		res = obj{{"type", "tool_result"}, {"timestamp", timestamp()}, {"tool_id", id}, {"status", "error"},
			{"output", t.output}, {"error", obj{{"type", "shell_error"}, {"message", fmt.Sprintf("exit code %d: %s", t.code, t.output)}}}}
	}
	a.emit(res)
}

func (gemini) huge(a *agent, size int) {
	id := a.geminiToolID("run_shell_command")
	geminiToolUse(a, "run_shell_command", id, obj{{"command", hugeCommand}, {"description", "print a big file"}})
	a.out.line(withFiller(geminiToolResult(id, fillerMark), size))
}

// progress alternates a list_directory call and its result: Gemini's
// stream has no reasoning event, and assistant text would change the
// answer (the concatenation of all deltas).
func (gemini) progress(a *agent, k int) {
	if k%2 == 0 {
		a.pending = a.geminiToolID("list_directory")
		geminiToolUse(a, "list_directory", a.pending, obj{{"dir_path", "."}})
		return
	}
	a.emit(geminiToolResult(a.pending, "Listed 2 item(s)."))
}

func (gemini) chunk(a *agent, pieces []string, i int) {
	a.emit(obj{{"type", "message"}, {"timestamp", timestamp()}, {"role", "assistant"}, {"content", pieces[i]}, {"delta", true}})
}

func (gemini) failAnswer(a *agent) {}

func geminiStats(a *agent, in, out int) obj {
	model := a.geminiModel()
	if model == "auto" {
		model = "gemini-2.5-pro"
	}
	return obj{
		{"total_tokens", in + out}, {"input_tokens", in}, {"output_tokens", out},
		{"cached", 0}, {"input", in}, {"duration_ms", time.Since(a.start).Milliseconds()},
		{"tool_calls", a.tools},
		{"models", obj{{model, obj{
			{"total_tokens", in + out}, {"input_tokens", in}, {"output_tokens", out},
			{"cached", 0}, {"input", in},
		}}}},
	}
}

func (gemini) done(a *agent) {
	a.emit(obj{{"type", "result"}, {"timestamp", timestamp()}, {"status", "success"},
		{"stats", geminiStats(a, tokens(a.prompt), tokens(a.s.answer()))}})
}

func (gemini) fail(a *agent) {
	a.emit(obj{{"type", "result"}, {"timestamp", timestamp()}, {"status", "error"},
		{"error", obj{{"type", "unknown"}, {"message", a.s.Fail}}},
		{"stats", geminiStats(a, 0, 0)}})
}

// ---- Claude Code: `claude -p --output-format stream-json --verbose` ----

type claude struct{}

const claudeVersion = "2.1.197"

func (a *agent) claudeModel() string {
	if m := a.model.Load(); m != nil {
		return *m // switched with set_model
	}
	if m, ok := flagValue(a.args, "--model"); ok {
		return m
	}
	return "claude-opus-4-8[1m]"
}

func (claude) begin(a *agent) {
	wd, _ := os.Getwd()
	mode, ok := flagValue(a.args, "--permission-mode")
	if !ok {
		mode = "default"
	}
	skills := []string{"deep-research", "update-config", "verify", "debug", "code-review", "simplify", "batch", "fewer-permission-prompts", "loop", "claude-api", "run"}
	a.emit(obj{
		{"type", "system"}, {"subtype", "init"}, {"cwd", wd}, {"session_id", a.sid},
		{"tools", []string{"Task", "Bash", "Edit", "NotebookEdit", "Read", "Skill", "TaskCreate", "TaskGet", "TaskList", "TaskOutput", "TaskStop", "TaskUpdate", "WebFetch", "WebSearch", "Write"}},
		{"mcp_servers", a.claudeMCPStatus()}, {"model", a.claudeModel()}, {"permissionMode", mode},
		{"slash_commands", append(skills, "clear", "compact", "config", "context", "init", "review", "usage")},
		{"apiKeySource", "ANTHROPIC_API_KEY"}, {"claude_code_version", claudeVersion},
		{"output_style", "default"}, {"agents", []string{"claude", "Explore", "general-purpose", "Plan"}},
		{"skills", skills}, {"plugins", []string{}},
		{"analytics_disabled", false}, {"product_feedback_disabled", false}, {"uuid", uuid4()},
		{"memory_paths", obj{{"auto", "/root/.claude/projects/fake/memory/"}}},
		{"fast_mode_state", "off"},
	})
}

// message starts a new assistant message (one model turn).
func (a *agent) newMessage() {
	a.msgID = "msg_" + randHex(8)
	a.reqID = "req_" + randHex(12)
	a.turns.Add(1)
}

func (a *agent) assistant(block obj) {
	if a.msgID == "" {
		a.newMessage()
	}
	a.emit(obj{{"type", "assistant"}, {"message", obj{
		{"id", a.msgID}, {"type", "message"}, {"role", "assistant"},
		{"model", strings.TrimSuffix(a.claudeModel(), "[1m]")},
		{"content", []obj{block}}, {"stop_reason", nil}, {"stop_sequence", nil},
		{"usage", obj{{"input_tokens", tokens(a.prompt)}, {"output_tokens", 1},
			{"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0}}},
		{"context_management", nil},
	}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
		{"request_id", a.reqID}})
}

// claudeBash prints a Bash tool call in a message of its own and the
// user event carrying its result; the next block starts a new message.
func claudeBash(a *agent, command string, run func() toolRun, huge int) {
	id := "toolu_" + randHex(12)
	a.newMessage()
	a.assistant(obj{{"type", "tool_use"}, {"id", id}, {"name", "Bash"},
		{"input", obj{{"command", command}, {"description", "Run " + command}}}})
	a.msgID = ""
	if huge == 0 && claudeBudgetHit(a) {
		return // Claude Code checks the budget before running the tool
	}
	t := run()
	output := t.output
	if t.failed {
		// Claude Code's content of a failed command.
		output = fmt.Sprintf("Exit code %d\n%s", t.code, t.output)
	}
	ev := obj{{"type", "user"}, {"message", obj{{"role", "user"}, {"content", []obj{{
		{"tool_use_id", id}, {"type", "tool_result"}, {"content", output}, {"is_error", t.failed},
	}}}}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
		{"timestamp", timestamp()},
		{"tool_use_result", obj{{"stdout", t.output}, {"stderr", ""}, {"interrupted", false},
			{"isImage", false}, {"noOutputExpected", false}}}}
	if huge > 0 {
		a.out.line(withFiller(ev, huge))
		return
	}
	a.emit(ev)
}

func (claude) tool(a *agent) {
	claudeBash(a, a.toolLine(), a.runTool, 0)
	if !a.stopped {
		claudeTurnsHit(a)
	}
}

func (claude) huge(a *agent, size int) {
	claudeBash(a, hugeCommand, func() toolRun { return toolRun{output: fillerMark} }, size)
}

func (claude) progress(a *agent, k int) {
	a.assistant(obj{{"type", "thinking"}, {"thinking", "Working, step " + strconv.Itoa(k+1) + "."},
		{"signature", "c2ln"}})
}

// chunk prints one text block per event; blocks of one message share its
// id, and result.result carries the whole answer.
func (claude) chunk(a *agent, pieces []string, i int) {
	if a.limits.schema != "" {
		if i == 0 {
			claudeStructured(a) // the whole answer, once
		}
		return
	}
	a.assistant(obj{{"type", "text"}, {"text", pieces[i]}})
}

// failAnswer prints the synthetic message Claude Code shows for an API
// error (captured: err500-noretry).
func (claude) failAnswer(a *agent) {
	a.turns.Add(1)
	a.emit(obj{{"type", "assistant"}, {"message", obj{
		{"id", uuid4()}, {"container", nil}, {"model", "<synthetic>"}, {"role", "assistant"},
		{"stop_details", nil}, {"stop_reason", "stop_sequence"}, {"stop_sequence", ""},
		{"type", "message"}, {"usage", claudeUsage(0, 0)},
		{"content", []obj{{{"type", "text"}, {"text", a.s.Fail}}}},
		{"context_management", nil},
	}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
		{"error", "unknown"}})
}

func claudeUsage(in, out int) obj {
	return obj{
		{"input_tokens", in}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0},
		{"output_tokens", out},
		{"server_tool_use", obj{{"web_search_requests", 0}, {"web_fetch_requests", 0}}},
		{"service_tier", "standard"},
		{"cache_creation", obj{{"ephemeral_1h_input_tokens", 0}, {"ephemeral_5m_input_tokens", 0}}},
		{"inference_geo", ""}, {"iterations", []int{}}, {"speed", "standard"},
	}
}

func claudeResult(a *agent, isError bool, apiStatus any, text, stop string, in, out int) obj {
	ms := time.Since(a.start).Milliseconds()
	cost := float64(in)*0.000005 + float64(out)*0.000025
	modelUsage := obj{}
	if in+out > 0 {
		modelUsage = obj{{a.claudeModel(), obj{
			{"inputTokens", in}, {"outputTokens", out}, {"cacheReadInputTokens", 0},
			{"cacheCreationInputTokens", 0}, {"webSearchRequests", 0}, {"costUSD", cost},
			{"contextWindow", 1000000}, {"maxOutputTokens", 64000},
		}}}
	}
	res := obj{
		{"type", "result"}, {"subtype", "success"}, {"is_error", isError},
		{"api_error_status", apiStatus}, {"duration_ms", ms}, {"duration_api_ms", ms / 2},
	}
	if !isError { // timings of the first token, absent when the API failed
		res = append(res, kv{"ttft_ms", ms * 9 / 10}, kv{"ttft_stream_ms", ms * 9 / 10}, kv{"time_to_request_ms", ms * 8 / 10})
	}
	return append(res, obj{
		{"num_turns", max(1, int(a.turns.Load()))}, {"result", text}, {"stop_reason", stop},
		{"session_id", a.sid}, {"total_cost_usd", cost}, {"usage", claudeUsage(in, out)},
		{"modelUsage", modelUsage}, {"permission_denials", a.claudeDenials()},
		{"terminal_reason", "completed"}, {"fast_mode_state", "off"}, {"uuid", uuid4()},
	}...)
}

func (claude) done(a *agent) {
	s := structuredAnswer(a)
	stop := "end_turn"
	if s != nil {
		stop = "tool_use" // the turn ended with the StructuredOutput call
	}
	res := claudeResult(a, false, nil, a.s.answer(), stop, tokens(a.prompt), tokens(a.s.answer()))
	if s != nil {
		// Captured (json-schema): structured_output follows
		// permission_denials.
		for i, f := range res {
			if f.k == "permission_denials" {
				res = append(res[:i+1], append(obj{{"structured_output", s}}, res[i+1:]...)...)
				break
			}
		}
	}
	a.emit(res)
}

func (claude) fail(a *agent) {
	if at := a.s.RateLimitedUntil; !at.IsZero() {
		// Captured from Claude Code with a claude.ai login: the rejected
		// limit, then a result with the API's status.
		a.emit(obj{{"type", "rate_limit_event"}, {"rate_limit_info", obj{
			{"status", "rejected"}, {"resetsAt", float64(at.UnixMilli()) / 1000}, {"rateLimitType", "five_hour"},
			{"overageStatus", "rejected"}, {"isUsingOverage", false},
		}}, {"uuid", uuid4()}, {"session_id", a.sid}})
		a.emit(claudeResult(a, true, 429, a.s.Fail, "stop_sequence", 0, 0))
		return
	}
	a.emit(claudeResult(a, true, nil, a.s.Fail, "stop_sequence", 0, 0))
}

// claudeInterrupted returns the result Claude Code prints when SIGINT
// interrupts a turn. No capture exists; the shape follows the captured
// error_max_turns result (maxturns.stdout), which has no "result" field.
// It runs on the signal goroutine, so it reads only fields that are
// immutable or atomic.
func claudeInterrupted(a *agent) []byte {
	ms := time.Since(a.start).Milliseconds()
	return mustMarshal(obj{
		{"type", "result"}, {"subtype", "error_during_execution"},
		{"duration_ms", ms}, {"duration_api_ms", ms / 2}, {"is_error", true},
		{"num_turns", max(1, int(a.turns.Load()))}, {"stop_reason", nil},
		{"session_id", a.sid}, {"total_cost_usd", 0}, {"usage", claudeUsage(0, 0)},
		{"modelUsage", obj{}}, {"permission_denials", []string{}},
		{"terminal_reason", "aborted_streaming"}, {"fast_mode_state", "off"},
		{"uuid", uuid4()}, {"errors", []string{"Request was aborted."}},
	})
}

// emit prints one event.
func (a *agent) emit(ev obj) { a.out.line(mustMarshal(ev)) }
