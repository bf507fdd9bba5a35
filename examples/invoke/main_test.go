package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
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

// captureStderr runs f with os.Stderr going to a pipe and returns what f
// wrote there.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	defer func() { os.Stderr = saved }()
	f()
	w.Close()
	return <-out
}

// invoke's errors name its own flags, never the library's Go identifiers.
func TestErrorsSpeakInFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		args       []string
		wantStatus int
		want       string
	}{
		{[]string{"-cli", "gemini", "-image", "pic.png", "-C", dir, "hi"}, 2, "-image is not supported by gemini"},
		{[]string{"-cli", "gemini", "-system", "be brief", "-C", dir, "hi"}, 2, "-system is not supported by gemini"},
		{[]string{"-cli", "codex", "-permission", "root", "-C", dir, "hi"}, 2, `unknown -permission "root"`},
		{[]string{"-cli", "codex", "-C", filepath.Join(dir, "nope"), "hi"}, 2, "-C " + filepath.Join(dir, "nope")},
		{[]string{"-cli", "codex", "-bin", missing, "-C", dir, "hi"}, 1, "-bin " + missing + " is not codex's executable"},
	} {
		var status int
		got := captureStderr(t, func() { status = run(tc.args) })
		if status != tc.wantStatus || !strings.Contains(got, tc.want) {
			t.Errorf("invoke %q = %d, stderr %q; want %d and %q", tc.args, status, got, tc.wantStatus, tc.want)
		}
		for _, ident := range []string{"invoker.", "Request.", "With"} {
			if strings.Contains(got, ident) {
				t.Errorf("invoke %q: stderr %q names the Go API (%q), want invoke's flags", tc.args, got, ident)
			}
		}
	}
}
