//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxProbeNestedConfig: the configuration names are held below
// the top of the working directory too, where they exist when the run
// starts. A Codex run at WorkspaceWrite is driven to overwrite a
// subdirectory's .claude/settings.json (Claude Code's hooks run commands
// when a later session starts there) and to add a hook to a nested
// repository's .git (which runs when the user next commits there), by
// its shell, then to write a file of the project beside them. Under the
// sandbox, with the run's mount namespace (root's here, or a user's where
// unprivileged user namespaces are allowed), both writes fail and the
// project's file is written; without the sandbox, Codex's own sandbox
// lets both through, which docs/sandbox.md states as open: the test
// checks that it still is.
func TestSandboxProbeNestedConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sandbox invoker.Sandbox
		// base is where the working directory is made: one beneath /tmp
		// has its top's entries bound back into the run's private /tmp,
		// the held names below them bound over those binds.
		base    string
		planted bool
	}{
		{"sandbox", invoker.Sandbox{Mode: "required"}, "", false},
		{"sandbox beyond tmp", invoker.Sandbox{Mode: "required"}, "/var/tmp", false},
		{"nosandbox", invoker.Sandbox{}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cx := newRig(t, cliNamed("codex"))
			cx.workIn(tc.base, "clinvoke-e2e-nested-")
			settings := filepath.Join(cx.workdir, "sub", ".claude", "settings.json")
			hook := filepath.Join(cx.workdir, "sub", ".git", "hooks", "pre-commit")
			for _, d := range []string{filepath.Dir(settings), filepath.Dir(hook)} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, settings, "{}\n")
			inside := filepath.Join(cx.workdir, "sub", "notes.txt")
			writeFile(t, inside, "before\n")
			cx.srv.Enqueue(
				fakemodel.Shell(`echo '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/planted"}]}]}}' > sub/.claude/settings.json`),
				fakemodel.Shell(`printf '#!/bin/sh\ntouch /tmp/planted\n' > sub/.git/hooks/pre-commit`),
				fakemodel.Shell(`echo after > sub/notes.txt`),
				fakemodel.EchoToolResult("after: "))
			req := cx.request("set the project up")
			req.Permission, req.Sandbox = invoker.WorkspaceWrite, tc.sandbox
			res, ev := probe(t, cx, req)
			if !strings.HasPrefix(res.Text, "after: ") {
				t.Errorf("answer %q, want the turn to go on to the model's answer", res.Text)
			}
			if len(ev.results) != 3 {
				t.Fatalf("%d tool results, want 3 (the two writes of held names and the project's file)", len(ev.results))
			}
			for i, r := range ev.results {
				wantFailed := i < 2 && !tc.planted
				if failed := r.Status == "failed"; failed != wantFailed {
					t.Errorf("tool result %d (%s): status %q, want failed %v", i, r.Name, r.Status, wantFailed)
				}
			}
			b, _ := os.ReadFile(settings)
			if got := strings.Contains(string(b), "hooks"); got != tc.planted {
				t.Errorf("sub/.claude/settings.json written %v, want %v: %q", got, tc.planted, b)
			}
			if _, err := os.Stat(hook); (err == nil) != tc.planted {
				t.Errorf("sub/.git/hooks/pre-commit made %v, want %v", err == nil, tc.planted)
			}
			if b, _ := os.ReadFile(inside); string(b) != "after\n" {
				t.Errorf("sub/notes.txt = %q, want the run's line: WorkspaceWrite must still write the project", b)
			}
		})
	}
}

// TestSandboxProbeNestedConfigMade: a configuration name below the top
// that does not exist when the run starts cannot be held (a bind needs a
// file to bind over). A Codex run at WorkspaceWrite under the sandbox is
// driven to make a new directory's .claude/settings.json and a nested
// repository's hook in a directory that had no .git, by its shell: both
// are written, and the run's end names both in one KindWarning event,
// after the turn's last tool result.
func TestSandboxProbeNestedConfigMade(t *testing.T) {
	cx := newRig(t, cliNamed("codex"))
	cx.workIn("", "clinvoke-e2e-nested-made-")
	if err := os.MkdirAll(filepath.Join(cx.workdir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cx.srv.Enqueue(
		fakemodel.Shell(`mkdir -p sub/new/.claude && echo '{}' > sub/new/.claude/settings.json`),
		fakemodel.Shell(`mkdir -p sub/.git/hooks && printf '#!/bin/sh\n' > sub/.git/hooks/pre-commit`),
		fakemodel.EchoToolResult("after: "))
	req := cx.request("set the project up")
	req.Permission, req.Sandbox = invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required"}
	res, ev := probe(t, cx, req)
	if !strings.HasPrefix(res.Text, "after: ") {
		t.Errorf("answer %q, want the turn to go on to the model's answer", res.Text)
	}
	made := []string{filepath.Join(cx.workdir, "sub", "new", ".claude"), filepath.Join(cx.workdir, "sub", ".git")}
	for _, m := range made {
		if _, err := os.Stat(m); err != nil {
			t.Fatalf("%s: %v; want the run to have made it (nothing held it)", m, err)
		}
	}
	var named []string
	for _, w := range ev.warns {
		if strings.Contains(w, "below the working directory") {
			named = append(named, w)
		}
	}
	if len(named) != 1 || !strings.Contains(named[0], made[0]) || !strings.Contains(named[0], made[1]) {
		t.Errorf("warnings %q, want one naming %q", ev.warns, made)
	}
}
