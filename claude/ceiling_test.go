package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// TestCanUseToolWorkspace checks that under WorkspaceWrite an edit is
// judged by its paths, resolved: through a link that leaves the working
// directory, by "..", in a CLI's configuration, or with Claude Code's
// blocked_path outside, it is denied without asking.
func TestCanUseToolWorkspace(t *testing.T) {
	w, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(w, "link")); err != nil {
		t.Fatal(err)
	}
	write := func(path, blocked string) []byte {
		return []byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"` +
			path + `","content":"x"},"permission_suggestions":[],"blocked_path":"` + blocked + `","tool_use_id":"toolu_1"}}`)
	}
	for _, tc := range []struct {
		name, path, blocked string
		inside              bool
	}{
		{"inside", filepath.Join(w, "sub", "a.txt"), filepath.Join(w, "sub", "a.txt"), true},
		{"relative inside", "a.txt", "", true},
		{"through a link", filepath.Join(w, "link", "pwned.txt"), filepath.Join(w, "link", "pwned.txt"), false},
		{"blocked path outside", filepath.Join(w, "a.txt"), filepath.Join(outside, "pwned.txt"), false},
		{"dot-dot", w + "/sub/../../pwned.txt", "", false},
		{"relative dot-dot", "../pwned.txt", "", false},
		{"claude settings", filepath.Join(w, ".claude", "settings.json"), "", false},
		{"no path", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: w, Permission: invoker.WorkspaceWrite, Approve: approveAll})
			st, err := p.Decode(write(tc.path, tc.blocked))
			if err != nil {
				t.Fatal(err)
			}
			if tc.inside {
				if len(st.Approvals) != 1 || len(st.Write) != 0 {
					t.Errorf("Step = %+v, want the program asked", st)
				}
				return
			}
			if len(st.Approvals) != 0 || len(st.Write) != 1 {
				t.Fatalf("Step = %d approvals, %q written; want a denial without asking", len(st.Approvals), st.Write)
			}
			if id, resp := answerOf(t, st.Write[0]); id != "r1" || resp["behavior"] != "deny" || !strings.Contains(resp["message"].(string), "workspace-write") {
				t.Errorf("answer = %s, want a denial of r1 naming the level", st.Write[0])
			}
		})
	}
}

// TestApprovalDuplicateID checks that a can_use_tool request reusing the
// id of one still waiting for the program is denied at once, and the
// waiting one with it: an answer to that id could reach either question,
// so the program's Allow of the first is never written.
func TestApprovalDuplicateID(t *testing.T) {
	p := backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll})
	first, _ := p.Decode(canUse("r1", "Bash", `{"command":"ls"}`))
	if len(first.Approvals) != 1 {
		t.Fatalf("the first request: Step = %+v, want an approval", first)
	}
	second, _ := p.Decode(canUse("r1", "Bash", `{"command":"rm -rf /w"}`))
	if len(second.Approvals) != 0 {
		t.Errorf("the second request was put to the program")
	}
	if len(second.Write) != 2 {
		t.Fatalf("the second request: wrote %q, want a denial for each request", second.Write)
	}
	for _, line := range second.Write {
		if id, resp := answerOf(t, line); id != "r1" || resp["behavior"] != "deny" {
			t.Errorf("wrote %s, want a denial of r1", line)
		}
	}
	// The id comes back for a third request, which is asked; the
	// program's Allow of the first, coming late, answers nothing.
	third, _ := p.Decode(canUse("r1", "Bash", `{"command":"rm -rf /"}`))
	if len(third.Approvals) != 1 {
		t.Fatalf("a third request under the id: Step = %+v, want it asked", third)
	}
	if late := first.Approvals[0].Answer(invoker.Decision{Allow: true}); late != nil {
		t.Errorf("the program's Allow of the first request was written: %q", late)
	}
	if lines := third.Approvals[0].Answer(invoker.Decision{}); len(lines) != 1 {
		t.Errorf("the third request's answer wrote %q, want one line", lines)
	}
	// A tool allowed for the session is no way around it.
	p = backend{}.NewSessionProtocol(&invoker.SessionRequest{Workdir: "/w", Permission: invoker.Unlimited, Approve: approveAll})
	st, _ := p.Decode(canUse("r1", "Bash", `{"command":"a"}`))
	st.Approvals[0].Answer(invoker.Decision{Allow: true, ForSession: true})
	first, _ = p.Decode(canUse("r2", "Task", `{}`))
	second, _ = p.Decode(canUse("r2", "Bash", `{"command":"b"}`))
	if len(second.Write) != 2 || strings.Contains(string(second.Write[0]), `"allow"`) {
		t.Errorf("a duplicate of a tool allowed for the session: wrote %q, want two denials", second.Write)
	}
	if late := first.Approvals[0].Answer(invoker.Decision{Allow: true}); late != nil {
		t.Errorf("the program's Allow of the first request was written: %q", late)
	}
}
