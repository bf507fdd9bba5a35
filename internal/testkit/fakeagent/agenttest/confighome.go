package agenttest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// CheckConfigHomeFromOptions checks, on the backend newInvoker makes with
// the fake agent of flavor, that a configuration home of an agent CLI
// (CODEX_HOME, CLAUDE_CONFIG_DIR) set only in invoker.Options.Env is
// outside the working directory for the permission ceiling: at
// WorkspaceWrite an edit into it is refused without asking Approve, and
// not written. The same edit without the variable is asked about, so the
// check can fail.
func CheckConfigHomeFromOptions(t *testing.T, flavor string, newInvoker func(...invoker.Options) invoker.Invoker) {
	for _, name := range []string{"CODEX_HOME", "CLAUDE_CONFIG_DIR"} {
		for _, set := range []bool{true, false} {
			wd := t.TempDir()
			edit := filepath.Join("agent-home", "settings.json")
			s := fakeagent.Script{Flavor: flavor, Edit: edit, Tag: fakeagent.NewTag(), RecordDir: t.TempDir()}
			opts := invoker.Options{Binary: os.Args[0], Env: s.Env()}
			if set {
				opts.Env = append(opts.Env, name+"="+filepath.Join(wd, "agent-home"))
			}
			var mu sync.Mutex
			var changes [][]string
			_, err := newInvoker(opts).Invoke(context.Background(), invoker.Request{Prompt: "p", Workdir: wd,
				Permission: invoker.WorkspaceWrite,
				Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
					mu.Lock()
					defer mu.Unlock()
					if a.Kind == invoker.ApprovalFileChange {
						changes = append(changes, a.Paths)
					}
					return invoker.Decision{Allow: true}
				}})
			if err != nil {
				t.Errorf("%s set %v: Invoke() error = %v", name, set, err)
			}
			_, statErr := os.Stat(filepath.Join(wd, edit))
			switch {
			case set && len(changes) > 0:
				t.Errorf("%s in Options.Env: Approve was asked about an edit in it: %q", name, changes)
			case set && statErr == nil:
				t.Errorf("%s in Options.Env: %s was written", name, edit)
			case !set && len(changes) != 1:
				t.Errorf("without %s: Approve was asked about %q, want the edit of %s", name, changes, edit)
			}
		}
	}
}
