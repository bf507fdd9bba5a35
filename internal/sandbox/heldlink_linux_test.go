//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxPrivateHeldLink: at WorkspaceWrite a held name of the
// working directory that is a symbolic link to a file elsewhere in it
// (.env -> .env.local, .env -> sub/dev.env, .mcp.json -> tools/mcp.json)
// is held like a settings file that is a link: the link and the file it
// ends at are bound read-only over themselves, so a write through the
// link and one to the target's own path fail, while the rest of the
// working directory stays writable.
func TestSandboxPrivateHeldLink(t *testing.T) {
	requirePrivate(t)
	cases := []struct {
		name, link, target string
	}{
		{"sibling", ".env", ".env.local"},
		{"beneath", ".env", "sub/dev.env"},
		{"mcp", ".mcp.json", "tools/mcp.json"},
		{"chain", ".env", "sub/hop"}, // sub/hop -> dev.env
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			if err := os.MkdirAll(r.work+"/sub", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(r.work+"/tools", 0o755); err != nil {
				t.Fatal(err)
			}
			end := filepath.Join(r.work, c.target)
			if c.name == "chain" {
				end = r.work + "/sub/dev.env"
				if err := os.Symlink("dev.env", r.work+"/sub/hop"); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(end, []byte("APP=1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(r.work, c.link)
			os.Remove(link)
			if err := os.Symlink(c.target, link); err != nil {
				t.Fatal(err)
			}
			p := r.policy(WorkspaceWrite)
			p.Private = true
			run(t, p, []probe{
				{"read-through-link", "test \"$(cat " + link + ")\" = APP=1", true},
				{"write-through-link", "echo X=1 >> " + link, false},
				{"write-target", "echo X=1 >> " + end, false},
				{"truncate-target", ": > " + end, false},
				{"relink", "ln -sfn sub/other " + link, false},
				{"write-workdir-file", "echo x >> " + r.work + "/a.txt", true},
				{"write-beside-target", "echo x > " + r.work + "/sub/new.txt", true},
			})
			if b, err := os.ReadFile(end); err != nil || string(b) != "APP=1\n" {
				t.Errorf("%s = %q, %v; want it untouched", end, b, err)
			}
			if got, err := os.Readlink(link); err != nil || got != c.target {
				t.Errorf("%s links to %q, %v; want %q", link, got, err, c.target)
			}
		})
	}
}

// TestSandboxHeldLinkUnheld: without a mount namespace (Landlock alone)
// a held name that is a symbolic link cannot have its target held, and
// Unheld names the link and its target (the run's log warns of it); with
// the private roots it is held and Unheld names nothing.
func TestSandboxHeldLinkUnheld(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	if err := os.Remove(r.work + "/.env"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.work+"/src/dev.env", []byte("APP=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/dev.env", r.work+"/.env"); err != nil {
		t.Fatal(err)
	}
	unheld := func(p Policy) []string {
		t.Helper()
		rs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		runBuilt(t, rs, p.Workdir, []probe{{"read-through-link", "cat " + r.work + "/.env", true}})
		return rs.Unheld()
	}
	p := r.policy(WorkspaceWrite)
	got := unheld(p)
	if len(got) != 1 || !strings.Contains(got[0], r.work+"/.env") || !strings.Contains(got[0], r.work+"/src/dev.env") {
		t.Errorf("without a mount namespace: Unheld = %q, want one naming %s and %s", got, r.work+"/.env", r.work+"/src/dev.env")
	}
	if got := unheld(r.policy(ReadOnly)); len(got) != 0 {
		t.Errorf("at ReadOnly: Unheld = %q, want nothing (the target is not writable)", got)
	}
	if ProbePrivate() != nil {
		return // a user's: the first stage's route is TestStageHeldNames
	}
	p.Private = true
	if got := unheld(p); len(got) != 0 {
		t.Errorf("with the private roots: Unheld = %q, want nothing", got)
	}
}
