package fakeagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// editRequest is what each CLI's question about Edit's file must hold
// (the file by its absolute path), and the answer that allows file
// changes for the session as the CLI suggests it (Claude Code: the mode
// acceptEdits).
var editRequest = map[string]struct {
	holds        func(path string) []string
	allowSession func(p twoWayProto, id json.RawMessage) string
}{
	Claude: {
		holds: func(path string) []string {
			return []string{`"subtype":"can_use_tool"`, `"tool_name":"Write"`, `"file_path":"` + path + `"`,
				`"type":"setMode","mode":"acceptEdits"`}
		},
		allowSession: func(_ twoWayProto, id json.RawMessage) string {
			return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) +
				`,"response":{"behavior":"allow","updatedPermissions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}}}`
		},
	},
	Codex: {
		holds: func(string) []string {
			return []string{`"method":"item/fileChange/requestApproval"`, `"itemId":"call_`}
		},
		allowSession: func(p twoWayProto, id json.RawMessage) string { return p.allowSession(id) },
	},
	Gemini: {
		holds: func(path string) []string {
			return []string{`"method":"session/request_permission"`, `"kind":"edit"`, `"title":"Writing to notes.txt"`,
				`"locations":[{"path":"` + path + `"}]`, `{"type":"diff","path":"` + path + `"`, `"optionId":"proceed_always"`}
		},
		allowSession: func(p twoWayProto, id json.RawMessage) string { return p.allowSession(id) },
	},
}

// TestTwoWayEdit checks, for the three session protocols, that Edit asks
// about a change of its file (a path relative to the working directory)
// in the CLI's format before the answer; that a denial leaves the file
// alone and the answer says so; that an allow writes it, a new file or an
// existing one (Claude Code: the changed input's file and content); that
// an allow for the session is not asked again; that an interrupt leaves
// the file alone and the session goes on; and that the fake exits with
// nothing of it left.
func TestTwoWayEdit(t *testing.T) {
	t.Parallel()
	for _, p := range twoWayProtos(nil, nil) {
		t.Run(p.flavor, func(t *testing.T) {
			t.Parallel()
			want := editRequest[p.flavor]
			for _, tc := range []struct {
				name   string
				answer string // Script.Answer
				old    string // the file's content before, if it exists
				run    func(t *testing.T, c *twoWayClient, path string)
			}{
				{name: "deny", run: func(t *testing.T, c *twoWayClient, path string) {
					text, kinds := c.turn(1, func(_ string, id json.RawMessage, l []byte) string {
						for _, s := range want.holds(path) {
							if !lineHas(l, s) {
								t.Errorf("the request %s does not hold %s", l, s)
							}
						}
						return p.deny(id)
					})
					if len(kinds) != 1 || kinds[0] != "approval" {
						t.Errorf("requests = %v, want one approval", kinds)
					}
					wantText := OutcomeDenied
					if p.flavor == Claude {
						wantText = OutcomeDenied + ": not today"
					}
					if text != wantText {
						t.Errorf("answer = %q, want %q", text, wantText)
					}
					if c.exists("notes.txt") {
						t.Error("the denied change wrote the file")
					}
				}},
				{name: "allow", answer: "Done.", run: func(t *testing.T, c *twoWayClient, path string) {
					text, _ := c.turn(1, func(_ string, id json.RawMessage, _ []byte) string { return p.allow(id) })
					if text != OutcomeEdited+"\nDone." {
						t.Errorf("answer = %q, want %q", text, OutcomeEdited+"\nDone.")
					}
					checkFile(t, path, EditContent)
					if p.flavor == Codex && !slices.ContainsFunc(c.lines, func(l string) bool {
						return strings.Contains(l, `"method":"item/started"`) && strings.Contains(l, `"type":"fileChange"`) &&
							strings.Contains(l, `"path":"`+path+`","kind":{"type":"add"}`)
					}) {
						t.Errorf("no fileChange item adding %s was started; lines:\n%s", path, strings.Join(c.lines, "\n"))
					}
				}},
				{name: "update", old: "old\n", run: func(t *testing.T, c *twoWayClient, path string) {
					text, _ := c.turn(1, func(_ string, id json.RawMessage, l []byte) string {
						if p.flavor == Gemini && !lineHas(l, `"oldText":"old\n"`) {
							t.Errorf("the request %s does not hold the file's content", l)
						}
						return p.allow(id)
					})
					if !strings.HasPrefix(text, OutcomeEdited) {
						t.Errorf("answer = %q, want %s", text, OutcomeEdited)
					}
					checkFile(t, path, EditContent)
					if p.flavor == Codex && !slices.ContainsFunc(c.lines, func(l string) bool {
						return strings.Contains(l, `"kind":{"type":"update"},"diff":"@@ -1,1 +1,1 @@\n-old\n+edited by the fake agent\n"`)
					}) {
						t.Errorf("no fileChange item updating %s; lines:\n%s", path, strings.Join(c.lines, "\n"))
					}
				}},
				{name: "session", run: func(t *testing.T, c *twoWayClient, path string) {
					_, kinds := c.turn(1, func(_ string, id json.RawMessage, _ []byte) string { return want.allowSession(p, id) })
					if len(kinds) != 1 {
						t.Errorf("turn 1: requests %v, want one", kinds)
					}
					os.Remove(path)
					text, kinds := c.turn(2, func(_ string, id json.RawMessage, _ []byte) string { return p.deny(id) })
					if len(kinds) != 0 || text != OutcomeEdited {
						t.Errorf("turn 2: requests %v, answer %q; want none and %s", kinds, text, OutcomeEdited)
					}
					checkFile(t, path, EditContent)
				}},
				{name: "interrupt", run: func(t *testing.T, c *twoWayClient, path string) {
					text, _ := c.turn(1, func(string, json.RawMessage, []byte) string { return c.interrupt() })
					if text != "" || c.exists("notes.txt") {
						t.Errorf("an interrupted turn answered %q, wrote %v; want nothing", text, c.exists("notes.txt"))
					}
					text, _ = c.turn(2, func(_ string, id json.RawMessage, _ []byte) string { return p.allow(id) })
					if !strings.HasPrefix(text, OutcomeEdited) {
						t.Errorf("turn after the interrupt answered %q, want %s", text, OutcomeEdited)
					}
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c := startTwoWay(t, p, Script{Edit: "notes.txt", Answer: tc.answer})
					path := filepath.Join(c.dir, "notes.txt")
					if tc.old != "" {
						if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					tc.run(t, c, path)
					code := 0
					if tc.name == "interrupt" && p.flavor == Claude {
						code = 1 // as Claude Code exits after a turn it aborted
					}
					c.close(code)
				})
			}
		})
	}
}

// TestTwoWayEditUnasked checks that Edit writes without asking where the
// CLI would not ask: Claude Code in the mode acceptEdits, Codex under the
// approval policy never, Gemini CLI in autoEdit mode; and that Ask, Edit
// and CallTool run in that order, each stating its outcome.
func TestTwoWayEditUnasked(t *testing.T) {
	t.Parallel()
	protos := twoWayProtos(map[string][]string{Claude: {"--permission-mode", "acceptEdits"}}, nil)
	protos[1].open[2] = `{"id":2,"method":"thread/start","params":{"approvalPolicy":"never"}}`
	protos[2].args = append(protos[2].args, "--approval-mode", "autoEdit")
	for _, p := range protos {
		t.Run(p.flavor, func(t *testing.T) {
			t.Parallel()
			c := startTwoWay(t, p, Script{Ask: "touch ran", Edit: "sub/notes.txt", CallTool: "none/tool"})
			var asked []string
			text, _ := c.turn(1, func(_ string, id json.RawMessage, l []byte) string {
				asked = append(asked, string(l))
				return p.allow(id)
			})
			for _, l := range asked {
				if strings.Contains(l, "notes.txt") {
					t.Errorf("the fake asked about the edit: %s", l)
				}
			}
			lines := strings.Split(text, "\n")
			if len(lines) != 3 || lines[0] != OutcomeApproved || lines[1] != OutcomeEdited || !strings.HasPrefix(lines[2], OutcomeToolFailed) {
				t.Errorf("answer = %q, want the lines approved, edited and the failed tool call", text)
			}
			checkFile(t, filepath.Join(c.dir, "sub", "notes.txt"), EditContent)
			c.close(0)
		})
	}
}

// TestTwoWayEditChangedInput checks that Claude Code's fake writes the
// file and content of an allow's changed input.
func TestTwoWayEditChangedInput(t *testing.T) {
	t.Parallel()
	p := twoWayProtos(nil, nil)[0]
	c := startTwoWay(t, p, Script{Edit: "notes.txt"})
	other := filepath.Join(c.dir, "other.txt")
	text, _ := c.turn(1, func(_ string, id json.RawMessage, _ []byte) string {
		return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) +
			`,"response":{"behavior":"allow","updatedInput":{"file_path":"` + other + `","content":"changed\n"}}}}`
	})
	if text != OutcomeEdited {
		t.Errorf("answer = %q, want %s", text, OutcomeEdited)
	}
	checkFile(t, other, "changed\n")
	if c.exists("notes.txt") {
		t.Error("the original file was written, not the changed input's")
	}
	c.close(0)
}

// checkFile fails t unless the file at path holds content.
func checkFile(t *testing.T, path, content string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != content {
		t.Errorf("%s = %q, %v; want %q", path, b, err, content)
	}
}
