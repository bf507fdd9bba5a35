package main

import (
	"path/filepath"
	"testing"
)

// TestRunWithTimeout runs invoke with -timeout, which wraps the signal
// context, against a missing binary: under -race it catches the signal
// goroutine reading a context variable that run reassigns.
func TestRunWithTimeout(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if got := run([]string{"-cli", "codex", "-bin", missing, "-timeout", "1h", "-q", "-C", t.TempDir(), "hi"}); got != 1 {
		t.Errorf("run() = %d, want 1 (the CLI is not installed)", got)
	}
}

func TestResumeCommand(t *testing.T) {
	const sid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	for _, tc := range []struct {
		perm, model, system, bin string
		want                     string
	}{
		{"read-only", "", "", "", "invoke -cli codex -C '/src/my project' -permission read-only -resume " + sid + " continue"},
		{"workspace-write", "gpt-5", "Answer briefly.", "/opt/codex",
			"invoke -cli codex -C '/src/my project' -permission workspace-write -model gpt-5 -system 'Answer briefly.' -bin /opt/codex -resume " + sid + " continue"},
	} {
		if got := resumeCommand("codex", "/src/my project", sid, tc.perm, tc.model, tc.system, tc.bin); got != tc.want {
			t.Errorf("resumeCommand(%q, %q, %q, %q) =\n  %s\nwant\n  %s", tc.perm, tc.model, tc.system, tc.bin, got, tc.want)
		}
	}
}
