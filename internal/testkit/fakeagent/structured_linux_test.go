package fakeagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const nameSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// claudeResultOf returns the fields of the result line among lines.
func claudeResultOf(t *testing.T, lines [][]byte) map[string]any {
	t.Helper()
	for _, l := range lines {
		var ev map[string]any
		if json.Unmarshal(l, &ev) == nil && ev["type"] == "result" {
			return ev
		}
	}
	t.Fatalf("no result line in %q", lines)
	return nil
}

func TestClaudeJSONSchema(t *testing.T) {
	t.Parallel()
	t.Run("StructuredOutput", func(t *testing.T) {
		t.Parallel()
		r := start(t, Script{Flavor: Claude, Answer: `{"name":"Ada"}`}, strings.NewReader("hi"), "--json-schema="+nameSchema)
		lines, code := r.finish()
		res := claudeResultOf(t, lines)
		got, _ := json.Marshal(res["structured_output"])
		if code != 0 || res["subtype"] != "success" || string(got) != `{"name":"Ada"}` || res["result"] != `{"name":"Ada"}` {
			t.Errorf("exit %d, result %v; want 0, success with structured_output and result {\"name\":\"Ada\"}", code, res)
		}
		if k := decode(t, Claude, lines).kinds; !strings.Contains(strings.Join(k, " "), "assistant/tool_use user/tool_result result/success") {
			t.Errorf("events %v, want the StructuredOutput call and its result before the result", k)
		}
	})
	t.Run("text answer", func(t *testing.T) {
		t.Parallel()
		r := start(t, Script{Flavor: Claude, Answer: "not json"}, strings.NewReader("hi"), "--json-schema="+nameSchema)
		lines, code := r.finish()
		res := claudeResultOf(t, lines)
		if _, ok := res["structured_output"]; ok || code != 0 || res["result"] != "not json" || res["num_turns"] != 2.0 {
			t.Errorf("exit %d, result %v; want 0, success with the text, 2 turns and no structured_output", code, res)
		}
	})
}

func TestClaudeLimits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		arg, subtype, msg string
		turns             float64
	}{
		{"--max-turns=1", "error_max_turns", "Reached maximum number of turns (1)", 2},
		{"--max-budget-usd=0.000001", "error_max_budget_usd", "Reached maximum budget ($0.000001)", 1},
	} {
		t.Run(tt.subtype, func(t *testing.T) {
			t.Parallel()
			r := start(t, Script{Flavor: Claude, Tool: true, SessionID: "s-lim"}, strings.NewReader("hi"), tt.arg)
			lines, code := r.finish()
			res := claudeResultOf(t, lines)
			errs, _ := res["errors"].([]any)
			if code != 1 || res["subtype"] != tt.subtype || res["is_error"] != true || res["num_turns"] != tt.turns ||
				res["session_id"] != "s-lim" || len(errs) != 1 || errs[0] != tt.msg || res["total_cost_usd"].(float64) <= 0 {
				t.Errorf("exit %d, result %v; want 1 and %s after %v turns with %q, the session and a cost", code, res, tt.subtype, tt.turns, tt.msg)
			}
		})
	}
	t.Run("limits not reached", func(t *testing.T) {
		t.Parallel()
		r := start(t, Script{Flavor: Claude, Tool: true}, strings.NewReader("hi"), "--max-turns=2", "--max-budget-usd=5")
		lines, code := r.finish()
		if res := claudeResultOf(t, lines); code != 0 || res["subtype"] != "success" {
			t.Errorf("exit %d, result %v; want a success", code, res)
		}
	})
}

func TestCodexOutputSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(nameSchema), 0o600)
	os.WriteFile(bad, []byte("{\n"), 0o600)
	r := start(t, Script{Answer: "not json at all"}, strings.NewReader("hi"), "exec", "--output-schema="+good, "-")
	lines, code := r.finish()
	if o := decode(t, Codex, lines); code != 0 || o.answer != "not json at all" || o.terminal != "success" {
		t.Errorf("with a JSON schema file: exit %d, answer %q, %s; want 0 and the answer unchecked, as codex does", code, o.answer, o.terminal)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.json")} {
		r := start(t, Script{}, strings.NewReader("hi"), "exec", "--output-schema", path, "-")
		lines, code := r.finish()
		if code != 1 || len(lines) != 0 || !strings.Contains(r.stderrText(), "Output schema file "+path+" is not valid JSON") {
			t.Errorf("schema file %s: exit %d, %d lines, stderr %q; want 1, none, codex's message", path, code, len(lines), r.stderrText())
		}
	}
}
