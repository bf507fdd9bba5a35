//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxProbeDotEnv: a working directory's .env is Gemini CLI's
// configuration. In a trusted folder (which the gemini backend requires)
// Gemini CLI reads the first .env walking up from its working directory
// and sets every variable it names that its environment lacks: a
// variable planted there by an earlier run reaches the next Gemini run
// and every command it starts (HTTPS_PROXY with
// NODE_TLS_REJECT_UNAUTHORIZED=0, NODE_OPTIONS, a base URL, ...).
//
// A Codex run at WorkspaceWrite is driven to append a variable to the
// project's existing .env by its patch tool and another by its shell; a
// Gemini run in the same folder then prints both from a command. Under the
// sandbox both writes are refused (.env is one of the configuration names
// held read-only at the top of the working directory) and the next Gemini
// run sees neither; the project's other files are still written. Without
// the sandbox Codex's own sandbox lets both through, which
// docs/approvals.md states as open: the test checks that it still is.
// A .env that is a symbolic link to .env.local is held with its target
// where the run has a mount namespace (root's here).
func TestSandboxProbeDotEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sandbox invoker.Sandbox
		// base is where the working directory is made: one beneath /tmp
		// is held by the run's mount namespace as root, one elsewhere by
		// Landlock alone.
		base    string
		planted bool
		// link makes .env a symbolic link to .env.local, which the run
		// may write as an entry of its own: the mount namespace holds
		// the link's target too.
		link bool
	}{
		{"sandbox", invoker.Sandbox{Mode: "required"}, "", false, false},
		{"sandbox beyond tmp", invoker.Sandbox{Mode: "required"}, "/var/tmp", false, false},
		{"sandbox link", invoker.Sandbox{Mode: "required"}, "", false, true},
		{"nosandbox", invoker.Sandbox{}, "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cx := newRig(t, cliNamed("codex"))
			cx.workIn(tc.base, "clinvoke-e2e-dotenv-")
			env := filepath.Join(cx.workdir, ".env")
			if tc.link {
				writeFile(t, env+".local", "APP_MODE=dev\n")
				if err := os.Symlink(".env.local", env); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, env, "APP_MODE=dev\n")
			}
			inside := filepath.Join(cx.workdir, "notes.txt")
			writeFile(t, inside, "before\n")
			patch := func(path, old, add string) fakemodel.Turn {
				return fakemodel.Turn{Call: &fakemodel.Call{Name: "apply_patch",
					Freeform: "*** Begin Patch\n*** Update File: " + path + "\n@@\n " + old + "\n+" + add + "\n*** End Patch\n"}}
			}
			cx.srv.Enqueue(
				patch(env, "APP_MODE=dev", "CLINVOKE_PATCHED=planted"),
				fakemodel.Shell("echo CLINVOKE_SHELL=planted >> .env"),
				patch(inside, "before", "after"),
				fakemodel.EchoToolResult("after: "))
			req := cx.request("set the project up")
			req.Permission, req.Sandbox = invoker.WorkspaceWrite, tc.sandbox
			var results []invoker.Tool
			req.OnEvent = func(ev invoker.Event) {
				if ev.Kind == invoker.KindToolResult && ev.Tool != nil {
					t.Logf("%s result (%s): %.200s", ev.Tool.Name, ev.Tool.Status, ev.Tool.Output)
					results = append(results, *ev.Tool)
				}
			}
			res, err := cx.invoke(context.Background(), req)
			if err != nil {
				t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
			}
			if !strings.HasPrefix(res.Text, "after: ") {
				t.Errorf("answer %q, want the turn to go on to the model's answer", res.Text)
			}
			// The patch of .env, the shell's append, the patch of the
			// project's file: the first two fail exactly when the
			// writes are refused.
			if len(results) != 3 {
				t.Fatalf("%d tool results, want 3 (the two writes of .env and the project's file)", len(results))
			}
			for i, r := range results {
				wantFailed := i < 2 && !tc.planted
				if failed := r.Status == "failed"; failed != wantFailed {
					t.Errorf("tool result %d (%s): status %q, want failed %v", i, r.Name, r.Status, wantFailed)
				}
			}
			b, _ := os.ReadFile(env)
			t.Logf(".env after the Codex run:\n%s", b)
			if got := strings.Contains(string(b), "planted"); got != tc.planted {
				t.Errorf(".env written %v, want %v: %q", got, tc.planted, b)
			}
			if b, _ := os.ReadFile(inside); !strings.Contains(string(b), "after") {
				t.Errorf("the project's file was not written (%q): WorkspaceWrite must still write the project", b)
			}

			gm := newRig(t, cliNamed("gemini"))
			gm.srv.Enqueue(fakemodel.Shell(`echo "patched=[$CLINVOKE_PATCHED] shell=[$CLINVOKE_SHELL] app=[$APP_MODE]"`),
				fakemodel.EchoToolResult("after: "))
			greq := gm.request("show the environment")
			greq.Workdir, greq.Permission = cx.workdir, invoker.Unlimited
			res, err = gm.invoke(context.Background(), greq)
			if err != nil {
				t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
			}
			t.Logf("gemini: %.300s", res.Text)
			if !strings.Contains(res.Text, "app=[dev]") {
				t.Fatalf("answer %q: Gemini CLI did not read the project's .env, so the probe shows nothing", res.Text)
			}
			want := "patched=[] shell=[]"
			if tc.planted {
				want = "patched=[planted] shell=[planted]"
			}
			if !strings.Contains(res.Text, want) {
				t.Errorf("answer %q, want %q in it", res.Text, want)
			}
		})
	}
}
