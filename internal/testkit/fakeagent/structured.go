package fakeagent

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The flags of structured answers and limits, handled as the pinned CLIs
// handle them (docs/structured-output.md; captures in testdata/claude:
// json-schema, json-schema-text, max-turns-1, max-budget):
//
//   - codex --output-schema FILE: the file must hold JSON, else codex exits
//     1 before any event with "Output schema file FILE is not valid JSON";
//     the answer is printed as usual, never checked.
//   - claude --json-schema SCHEMA: an Answer that is JSON is given through
//     the StructuredOutput tool (a tool_use, its tool_result, and a result
//     carrying structured_output); any other Answer is given as text twice,
//     with Claude Code's synthetic reminder between, and the result has no
//     structured_output.
//   - claude --max-turns N: a Tool call takes one turn and the answer one
//     more; with N = 1 and Tool, the turn stops after the tool result with
//     a result of subtype error_max_turns and exit status 1.
//   - claude --max-budget-usd X: when the cost of the first model response
//     (the Tool call) exceeds X, the turn stops after the tool_use with a
//     result of subtype error_max_budget_usd and exit status 1.

// limits are the flags of a run that shape its answer or stop it.
type limits struct {
	schema    string  // claude --json-schema, "" if absent
	maxTurns  int     // claude --max-turns, 0 if absent
	maxBudget float64 // claude --max-budget-usd, 0 if absent
	budgetArg string  // the budget as given
}

func limitsOf(flavor string, args []string) limits {
	var l limits
	if flavor != Claude {
		return l
	}
	l.schema, _ = flagValue(args, "--json-schema")
	if v, ok := flagValue(args, "--max-turns"); ok {
		l.maxTurns, _ = strconv.Atoi(v)
	}
	if v, ok := flagValue(args, "--max-budget-usd"); ok {
		l.budgetArg = v
		l.maxBudget, _ = strconv.ParseFloat(v, 64)
	}
	return l
}

// checkOutputSchema does what codex does with --output-schema before its
// first event: it reads the file as JSON. It returns false, having
// printed codex's message, when that fails.
func checkOutputSchema(flavor string, args []string) bool {
	if flavor != Codex {
		return true
	}
	path, ok := flagValue(args, "--output-schema")
	if !ok {
		return true
	}
	b, err := os.ReadFile(path)
	if err == nil && !json.Valid(b) {
		var v any
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Output schema file %s is not valid JSON: %v\n", path, err)
		return false
	}
	return true
}

// claudeResponseCost is what Claude Code computes for one model response of
// the fake: the prompt's tokens in, one token out.
func claudeResponseCost(a *agent) float64 { return claudeCost(tokens(a.prompt), 1) }

func claudeCost(in, out int) float64 { return float64(in)*0.000005 + float64(out)*0.000025 }

// claudeBudgetHit ends the turn, right after the tool_use of the first
// model response, when that response cost more than --max-budget-usd, and
// reports whether it did.
func claudeBudgetHit(a *agent) bool {
	l := a.limits
	if l.maxBudget <= 0 || claudeResponseCost(a) <= l.maxBudget {
		return false
	}
	a.emit(claudeLimitResult(a, "error_max_budget_usd", 1, false, "Reached maximum budget ($"+l.budgetArg+")"))
	a.stopped = true
	return true
}

// claudeTurnsHit ends the turn after the tool result when --max-turns
// leaves no turn for the answer, and reports whether it did.
func claudeTurnsHit(a *agent) bool {
	l := a.limits
	// The tool call was turn 1; the answer would be turn 2.
	if l.maxTurns <= 0 || l.maxTurns >= 2 {
		return false
	}
	a.emit(claudeLimitResult(a, "error_max_turns", l.maxTurns+1, true, "Reached maximum number of turns ("+strconv.Itoa(l.maxTurns)+")"))
	a.stopped = true
	return true
}

// claudeLimitResult is the result of a turn stopped by a limit (captured:
// max-turns-1, max-budget); only the turn limit has a terminal_reason.
func claudeLimitResult(a *agent, subtype string, turns int, terminal bool, msg string) obj {
	ms := time.Since(a.start).Milliseconds()
	in, out := tokens(a.prompt), 1
	cost := claudeCost(in, out)
	res := obj{
		{"type", "result"}, {"subtype", subtype}, {"duration_ms", ms}, {"duration_api_ms", ms / 2},
		{"is_error", true}, {"num_turns", turns}, {"stop_reason", "tool_use"}, {"session_id", a.sid},
		{"total_cost_usd", cost}, {"usage", claudeUsage(in, out)},
		{"modelUsage", obj{{a.claudeModel(), obj{
			{"inputTokens", in}, {"outputTokens", out}, {"cacheReadInputTokens", 0},
			{"cacheCreationInputTokens", 0}, {"webSearchRequests", 0}, {"costUSD", cost},
			{"contextWindow", 1000000}, {"maxOutputTokens", 64000},
		}}}},
		{"permission_denials", []string{}},
	}
	if terminal {
		res = append(res, kv{"terminal_reason", "max_turns"})
	}
	return append(res, obj{{"fast_mode_state", "off"}, {"uuid", uuid4()}, {"errors", []string{msg}}}...)
}

// structuredAnswer returns the Answer as JSON when the run has a
// --json-schema and the Answer is JSON (the model calls StructuredOutput),
// else nil.
func structuredAnswer(a *agent) json.RawMessage {
	if a.limits.schema == "" {
		return nil
	}
	ans := strings.TrimSpace(a.s.answer())
	if !json.Valid([]byte(ans)) {
		return nil
	}
	return json.RawMessage(ans)
}

// claudeStructured prints the answer under --json-schema: the
// StructuredOutput call and its result (captured: json-schema), or, for an
// answer that is not JSON, the text, Claude Code's reminder and the text
// again (captured: json-schema-text).
func claudeStructured(a *agent) {
	if s := structuredAnswer(a); s != nil {
		id := "toolu_" + randHex(12)
		a.newMessage()
		a.assistant(obj{{"type", "tool_use"}, {"id", id}, {"name", "StructuredOutput"}, {"input", s}})
		a.msgID = ""
		const ok = "Structured output provided successfully"
		a.emit(obj{{"type", "user"}, {"message", obj{{"role", "user"}, {"content", []obj{{
			{"tool_use_id", id}, {"type", "tool_result"}, {"content", ok},
		}}}}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
			{"timestamp", timestamp()}, {"tool_use_result", ok}})
		a.turns.Add(1) // the turn that reads the tool's result
		return
	}
	a.newMessage()
	a.assistant(obj{{"type", "text"}, {"text", a.s.answer()}})
	a.emit(obj{{"type", "user"}, {"message", obj{{"role", "user"}, {"content", []obj{{
		{"type", "text"}, {"text", "[structured-output-enforce] You MUST call the StructuredOutput tool to complete this request. Call this tool now."},
	}}}}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()},
		{"timestamp", timestamp()}, {"isSynthetic", true}})
	a.newMessage()
	a.assistant(obj{{"type", "text"}, {"text", a.s.answer()}})
}
