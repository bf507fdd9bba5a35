package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSandboxMasked: a masked file, a directory of secrets and a link to
// the file are read as nothing by the run at every level, written by none,
// while a file beside them and a masked path the policy shows stay
// readable; where the run has its mount namespace they are masked, not
// split by the rules (the plan masks them, the rules do not hide them),
// and where it has none the rules hide them.
func TestSandboxMasked(t *testing.T) {
	requireLandlock(t)
	base, err := os.MkdirTemp("/var/tmp", "clinvoke-mask-") // not beneath a private root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	secret, keys, link, beside, shown := base+"/secret", base+"/keys", base+"/link", base+"/beside", base+"/shown"
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{secret: "KEY=1\n", keys + "/id": "KEY=2\n", beside: "ok\n", shown: "KEY=3\n"} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		level   Level
		private bool
	}{
		{"read-only", ReadOnly, true},
		{"workspace-write", WorkspaceWrite, true},
		{"unlimited", Unlimited, true},
		{"read-only/rules", ReadOnly, false},
		{"unlimited/rules", Unlimited, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.private {
				requirePrivate(t)
			}
			r := newRig(t)
			p := r.policy(c.level)
			p.Private = c.private
			p.Masked = []string{link, keys, shown, base + "/gone"}
			p.Visible = append(p.Visible, shown)
			rs, err := Build(p)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			var plan []string
			if rs.private != nil {
				plan = rs.private.Masked
			}
			if want := []string{secret, keys}; c.private && !slices.Equal(plan, want) {
				t.Errorf("the plan masks %q, want %q", plan, want)
			}
			if !c.private && len(plan) != 0 {
				t.Errorf("the plan masks %q without a mount namespace", plan)
			}
			runBuilt(t, rs, p.Workdir, []probe{
				{"read-file", "! grep -q KEY " + secret, true},
				{"read-through-link", "! grep -q KEY " + link, true},
				{"read-dir", "! grep -rq KEY " + keys, true},
				{"list-dir", `test -z "$(ls -A ` + keys + ` 2>/dev/null)"`, true},
				{"write-file", "echo x >> " + secret, false},
				{"make-in-dir", "echo x > " + keys + "/new", false},
				{"read-beside", "grep -q ok " + beside, true},
				{"read-shown", "grep -q KEY " + shown, true},
			})
			for f, body := range map[string]string{secret: "KEY=1\n", keys + "/id": "KEY=2\n"} {
				if b, err := os.ReadFile(f); err != nil || string(b) != body {
					t.Errorf("%s = %q, %v; want it untouched", f, b, err)
				}
			}
			if _, err := os.Stat(filepath.Join(keys, "new")); err == nil {
				t.Errorf("%s/new was made", keys)
			}
		})
	}
}

// TestSandboxMaskFailsClosed: a mask that cannot be made (the directory
// above the secret replaced by a link between the plan and the run's
// start) fails the restriction: the rules do not hide a masked path, so
// the run must not start without its mask.
func TestSandboxMaskFailsClosed(t *testing.T) {
	requirePrivate(t)
	base, err := os.MkdirTemp("/var/tmp", "clinvoke-mask-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/secret", []byte("KEY=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	p := r.policy(ReadOnly)
	p.Private, p.Masked = true, []string{dir + "/secret"}
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	clonedHook = func() {
		if err := os.Rename(dir, dir+"2"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink("d2", dir); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { clonedHook = nil })
	err = Retired(func() error { return rs.RestrictDropping() })
	if err == nil || !strings.Contains(err.Error(), "masks the system's secrets") {
		t.Fatalf("RestrictDropping() = %v, want the mask's failure", err)
	}
}
