package fakeacp_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeacp"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// TestMain runs the fake when the test binary is started as one, and
// fails the run if a process of the fake or a goroutine outlives the
// tests.
func TestMain(m *testing.M) {
	fakeacp.Main()
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// TestEdit checks that Edit asks about a change of its file (relative to
// the session's cwd) as Gemini CLI asks, so that the ACP client gives
// Approve a file_change naming the file; that an allow writes the file,
// new or existing, and a rejection leaves it alone; and that nothing of
// the fake is left once Invoke returned.
func TestEdit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		allow bool
		old   string // the file's content before, if it exists
		want  string // the answer's first line
	}{
		{name: "rejected", want: "denied (cancel)"},
		{name: "rejected over a file", old: "old\n", want: "denied (cancel)"},
		{name: "allowed", allow: true, want: "edited"},
		{name: "allowed over a file", allow: true, old: "old\n", want: "edited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wd := t.TempDir()
			path := filepath.Join(wd, "sub", "notes.txt")
			if tc.old != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := fakeacp.Script{Edit: filepath.Join("sub", "notes.txt"), Answer: "Done.", Tag: fakeagent.NewTag()}
			var asked []invoker.Approval
			agent := acp.Agent{Name: "fakeacp", Command: []string{os.Args[0], "--acp"}, Env: s.Env()}
			res, err := acp.New(agent).Invoke(context.Background(), invoker.Request{
				Prompt: "edit", Workdir: wd, Permission: invoker.Unlimited,
				Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
					asked = append(asked, a)
					return invoker.Decision{Allow: tc.allow}
				}})
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("processes of the fake alive after Invoke returned: %v", left)
			}
			if err != nil || res.Text != tc.want+"\nDone." {
				t.Errorf("Invoke() = %q, %v; want %q, nil", res.Text, err, tc.want+"\nDone.")
			}
			if len(asked) != 1 {
				t.Fatalf("Approve was called %d times, want once", len(asked))
			}
			if a := asked[0]; a.Kind != "file_change" || len(a.Paths) != 1 || a.Paths[0] != path {
				t.Errorf("Approval = {Kind %q, Paths %q}, want a file_change of %s", a.Kind, a.Paths, path)
			}
			want := tc.old
			if tc.allow {
				want = fakeagent.EditContent
			}
			b, err := os.ReadFile(path)
			if string(b) != want || want != "" && err != nil {
				t.Errorf("%s holds %q (%v), want %q", path, b, err, want)
			}
		})
	}
}
