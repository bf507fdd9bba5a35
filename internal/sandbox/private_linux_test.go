//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func requirePrivate(t testing.TB) {
	t.Helper()
	requireLandlock(t)
	if err := ProbePrivate(); err != nil {
		t.Skipf("no mount namespace for this process (a user's): %v", err)
	}
}

// TestSandboxPrivateRoots: with Private, the probes that hold without it
// hold for a rig beneath /tmp (its paths bound back into the private
// /tmp), but for /tmp and /dev/shm, which the shell writes, and which the
// host does not see; the CLI's settings file is held read-only, renames
// over it and its removal refused.
func TestSandboxPrivateRoots(t *testing.T) {
	requirePrivate(t)
	for _, level := range []Level{ReadOnly, WorkspaceWrite} {
		r := newRig(t)
		name := filepath.Base(filepath.Dir(r.root))
		tmp, shm := "/tmp/clinvoke-sandbox-probe-"+name, "/dev/shm/clinvoke-sandbox-probe-"+name
		t.Cleanup(func() { os.Remove(tmp); os.Remove(shm) })
		p := r.policy(level)
		p.Private, p.Settings = true, []string{r.home + "/.codex/config.toml"}
		var probes []probe
		for _, pr := range commonProbes(r) {
			switch pr.name {
			case "write-tmp", "write-beside-temp":
				// In the run's own /tmp.
				pr.allowed = true
			}
			probes = append(probes, pr)
		}
		probes = append(probes,
			probe{"write-shm", "echo x > " + shm + " && cat " + shm, true},
			probe{"write-tmp-read-back", "echo x > " + tmp + " && cat " + tmp, true},
			probe{"replace-cli-config", "echo x > " + r.home + "/.codex/sessions/c && mv " + r.home + "/.codex/sessions/c " + r.home + "/.codex/config.toml", false},
			probe{"remove-cli-config", "rm -f " + r.home + "/.codex/config.toml", false},
			probe{"write-workdir", "echo x >> " + r.work + "/src/b.txt", level == WorkspaceWrite},
			probe{"new-at-workdir-top", "echo x > " + r.work + "/new.txt", false},
		)
		run(t, p, probes)
		for _, f := range []string{tmp, shm, r.root + "/outside", "/tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root)} {
			if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v: %s reached the host: %v", level, f, err)
			}
		}
		assertUntouched(t, r)
		if b, _ := os.ReadFile(r.home + "/.codex/config.toml"); string(b) != "model = 'x'" {
			t.Errorf("config.toml = %q, want it untouched", b)
		}
	}
}

// TestSandboxPrivateHiddenBeneath: a hidden path beneath a path the run
// is given beneath /tmp would be readable through the tmpfs's rule, so
// the run keeps the host's /tmp, no plan is handed to a first stage, and
// Private says why.
func TestSandboxPrivateHiddenBeneath(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	p := r.policy(ReadOnly)
	p.Private, p.Hidden = true, append(p.Hidden, r.work+"/src")
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if plan := rs.PrivatePlan(); plan != nil {
		t.Errorf("PrivatePlan() = %s; want none", plan)
	}
	if ok, why := rs.Private(); ok || !strings.Contains(why, r.work+"/src") {
		t.Errorf("Private() = %v, %q; want false, naming the hidden path", ok, why)
	}
	run(t, p, []probe{{"read-hidden", "cat " + r.work + "/src/b.txt", false}, {"write-tmp", "echo x > /tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root), false}})
}

// BenchmarkRestrict measures the forking thread's work for a ceiling
// with and without private roots (the namespace, the mounts, the binds of
// a rig beneath /tmp, the settings file held, the ruleset applied), the
// ruleset built beforehand and the namespace's teardown after (a run
// pays it once it returned, see Namespace), neither timed.
func BenchmarkRestrict(b *testing.B) {
	requirePrivate(b)
	for _, private := range []bool{false, true} {
		b.Run(map[bool]string{false: "landlock", true: "private"}[private], func(b *testing.B) {
			r := newRig(b)
			p := r.policy(WorkspaceWrite)
			p.Private, p.Settings = private, []string{r.home + "/.codex/config.toml"}
			benchRestrict(b, p)
		})
	}
}

// benchRestrict times the forking thread's work for p at each of b's
// iterations, the ruleset built before it and closed after (the
// namespace's teardown: a run's is off its path), neither timed.
func benchRestrict(b *testing.B, p Policy) {
	for b.Loop() {
		b.StopTimer()
		rs, err := Build(p)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := Retired(rs.Restrict); err != nil {
			b.Fatal(err)
		}
		if ok, why := rs.Private(); ok != p.Private {
			b.Fatalf("Private() = %v (%s), want %v", ok, why, p.Private)
		}
		b.StopTimer()
		rs.Close()
		b.StartTimer()
	}
}

// TestSandboxPrivateNamed: the files the command line and the environment
// name beneath /tmp (a flag's value, a quoted TOML value) are planned as
// read-only binds, and a name beneath the hidden home is not.
func TestSandboxPrivateNamed(t *testing.T) {
	r := newRig(t)
	dir, err := os.MkdirTemp("/tmp", "clinvoke-named-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg, bin := filepath.Join(dir, "mcp.json"), filepath.Join(dir, "bin")
	for _, f := range []string{cfg, bin} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := r.policy(ReadOnly)
	p.Private = true
	p.Named = []string{"--mcp-config=" + cfg, `mcp_servers.a.command="` + bin + `"`, "KEY=" + r.home + "/.ssh/id_ed25519"}
	pl, why := planPrivate(p, followSettings(p.Settings))
	if pl == nil {
		t.Fatalf("planPrivate() = nil, %q", why)
	}
	got := map[string]bool{}
	for _, b := range pl.Binds {
		got[b.Path] = b.RW
	}
	for _, f := range []string{cfg, bin} {
		if rw, ok := got[f]; !ok || rw {
			t.Errorf("%s: planned %v, writable %v; want a read-only bind", f, ok, rw)
		}
	}
	if _, ok := got[r.home+"/.ssh/id_ed25519"]; ok {
		t.Errorf("the hidden key is planned as a bind: %v", pl.Binds)
	}
	// A longer path that ends like one beneath /tmp names no /tmp path.
	p.Named = []string{"X=/var" + cfg, "--cache=/home/u" + bin}
	if pl, _ = planPrivate(p, followSettings(p.Settings)); pl != nil {
		for _, b := range pl.Binds {
			if b.Path == cfg || b.Path == bin {
				t.Errorf("%s planned as a bind from a path that only ends like it", b.Path)
			}
		}
	}
}

// privateDir makes a directory beneath the host's /tmp, removed after t.
func privateDir(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// assertPrivate fails t unless rs gave its run the private roots.
func assertPrivate(t *testing.T, rs *Ruleset) {
	t.Helper()
	if ok, why := rs.Private(); !ok {
		t.Errorf("Private() = false, %q; want the private /tmp to hold", why)
	}
}

// TestSandboxPrivateVanishedMountPoint: a path the run is given beneath
// another one it may write, removed from the host once cloned, is not
// made again on the host to move its clone onto (the bind is left out),
// and the run still gets its private /tmp.
func TestSandboxPrivateVanishedMountPoint(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	dir := privateDir(t, "clinvoke-vanish-")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := r.policy(ReadOnly)
	p.Private, p.Writable = true, append(p.Writable, dir, sub)
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	clonedHook = func() {
		if err := os.Remove(sub); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { clonedHook = nil })
	tmp := "/tmp/clinvoke-sandbox-probe-" + filepath.Base(dir)
	runBuilt(t, rs, p.Workdir, []probe{
		{"write-given", "echo x > " + dir + "/f && cat " + dir + "/f", true},
		{"write-tmp", "echo x > " + tmp + " && cat " + tmp, true},
	})
	assertPrivate(t, rs)
	if _, err := os.Lstat(sub); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was made again on the host: %v", sub, err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s reached the host: %v", tmp, err)
	}
}

// TestSandboxPrivateVanishedSource: a settings file and a named file
// removed from the host between Build and Restrict (a CLI saving by
// rename) cost only their own binds: the run still gets its private /tmp
// and the rest of what it is given there.
func TestSandboxPrivateVanishedSource(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	dir := privateDir(t, "clinvoke-vanish-")
	named, kept := filepath.Join(dir, "mcp.json"), filepath.Join(dir, "schema.json")
	for _, f := range []string{named, kept} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings := r.home + "/.codex/config.toml"
	p := r.policy(ReadOnly)
	p.Private, p.Settings = true, []string{settings}
	p.Named = []string{"--mcp-config=" + named, "--output-schema=" + kept}
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for _, f := range []string{named, settings} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	tmp := "/tmp/clinvoke-sandbox-probe-" + filepath.Base(dir)
	runBuilt(t, rs, p.Workdir, []probe{
		{"read-kept", "cat " + kept, true},
		{"write-kept", "echo x > " + kept, false},
		{"write-tmp", "echo x > " + tmp + " && cat " + tmp, true},
	})
	assertPrivate(t, rs)
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s reached the host: %v", tmp, err)
	}
}

// TestSandboxPrivateLinkBeneathBind: a path the run is given that is a
// symbolic link, beneath another path it is given, costs nothing: the
// link reads through to its target, bound at its own path, and a link
// given at the top of the private /tmp is made there.
func TestSandboxPrivateLinkBeneathBind(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	dir, target := privateDir(t, "clinvoke-link-"), privateDir(t, "clinvoke-target-")
	if err := os.WriteFile(target+"/f", []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	link, top := filepath.Join(dir, "link"), "/tmp/clinvoke-toplink-"+filepath.Base(dir)
	for _, l := range []string{link, top} {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(top) })
	p := r.policy(ReadOnly)
	p.Private, p.Writable = true, append(p.Writable, dir)
	p.Visible = append(p.Visible, link, top)
	tmp := "/tmp/clinvoke-sandbox-probe-" + filepath.Base(dir)
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	runBuilt(t, rs, p.Workdir, []probe{
		{"read-through-link", "test \"$(cat " + link + "/f)\" = target", true},
		{"read-through-top-link", "test -L " + top + " && test \"$(cat " + top + "/f)\" = target", true},
		{"write-tmp", "echo x > " + tmp + " && cat " + tmp, true},
	})
	assertPrivate(t, rs)
}

// TestSandboxPrivatePlannedWhereItHolds: Build plans the private roots
// only where this process can make them (the forking thread's route);
// elsewhere Private says why from the start, and PrivatePlan still plans
// them for a first stage that can (in a user namespace of its own).
func TestSandboxPrivatePlannedWhereItHolds(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	p := r.policy(ReadOnly)
	p.Private = true
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	probe := ProbePrivate()
	if planned := rs.private != nil; planned != (probe == nil) {
		t.Errorf("planned by Build: %v; ProbePrivate() = %v", planned, probe)
	}
	if ok, why := rs.Private(); probe != nil && (ok || !strings.Contains(why, "CAP_SYS_ADMIN")) {
		t.Errorf("Private() = %v, %q; want false, naming the capability", ok, why)
	}
	if rs.PrivatePlan() == nil {
		t.Error("PrivatePlan() = nil; want a plan for a first stage")
	}
}

// TestSandboxPrivateLinkedSettings: a settings file that is a symbolic
// link (a dotfiles manager's) is held whole: the link and every link on
// the way are bound read-only over themselves (a rename over one, its
// removal, a link made in its place: EBUSY), and so is the final target,
// so a write through the link and one to the target's own path fail
// (EROFS), even where the run may write the target's directory (a target
// in the working directory at WorkspaceWrite). The target reads through
// the link only where it is visible anyway: in the hidden home only with
// its directory in Visible, so a link an earlier run planted to another
// tool's file of the same name (its keys) reads nothing, and HiddenLinks
// names each link that leads into a hidden path.
func TestSandboxPrivateLinkedSettings(t *testing.T) {
	requirePrivate(t)
	for _, level := range []Level{ReadOnly, WorkspaceWrite} {
		r := newRig(t)
		codex, claude := r.home+"/.codex", r.home+"/.claude"
		for _, d := range []string{r.home + "/dotfiles/codex", r.home + "/private", r.home + "/.gemini", claude} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		files := map[string]string{
			r.home + "/dotfiles/codex/AGENTS.md": "be kind", r.work + "/src/dot.md": "override",
			r.home + "/private/GEMINI.md": "private", r.home + "/.gemini/settings.json": "TOKEN",
		}
		for name, body := range files {
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		links := map[string]string{
			codex + "/AGENTS.md":          "../dotfiles/codex/AGENTS.md", // relative
			codex + "/AGENTS.override.md": codex + "/chain.md",           // a link to a link
			codex + "/chain.md":           r.work + "/src/dot.md",
			// Links an earlier run made: to a secret, into a hidden path
			// of the program's (Hide), to another tool's file of the
			// same name.
			codex + "/CLAUDE.md":      r.home + "/.ssh/id_ed25519",
			codex + "/GEMINI.md":      r.home + "/private/GEMINI.md",
			claude + "/settings.json": r.home + "/.gemini/settings.json",
		}
		for l, target := range links {
			if err := os.Symlink(target, l); err != nil {
				t.Fatal(err)
			}
		}
		p := r.policy(level)
		// The CLIs' homes writable whole, as a run's is.
		p.Private, p.Writable, p.Tops = true, append(p.Writable, codex, claude), nil
		p.Settings = []string{codex + "/config.toml", codex + "/AGENTS.md", codex + "/AGENTS.override.md", codex + "/CLAUDE.md", codex + "/GEMINI.md", claude + "/settings.json"}
		p.Hidden = append(p.Hidden, r.home+"/private")
		agents, override := codex+"/AGENTS.md", codex+"/AGENTS.override.md"
		secrets := []probe{
			{"read-secret-through-link", "cat " + codex + "/CLAUDE.md", false},
			{"read-hidden-through-link", "cat " + codex + "/GEMINI.md", false},
			{"read-same-name-through-link", "cat " + claude + "/settings.json", false},
		}
		hiddenLinks := []Link{
			{Path: agents, Target: r.home + "/dotfiles/codex/AGENTS.md"},
			{Path: codex + "/CLAUDE.md", Target: r.home + "/.ssh/id_ed25519"},
			{Path: codex + "/GEMINI.md", Target: r.home + "/private/GEMINI.md"},
			{Path: claude + "/settings.json", Target: r.home + "/.gemini/settings.json"},
		}
		if got := builtLinks(t, p); !slices.Equal(got, hiddenLinks) {
			t.Errorf("%v: HiddenLinks = %v, want %v", level, got, hiddenLinks)
		}
		run(t, p, append([]probe{
			{"read-through-hidden-link", "cat " + agents, false},
			{"read-through-chain", "test \"$(cat " + override + ")\" = override", true},
		}, secrets...))
		// The dotfiles repository shown (Sandbox.Show).
		p.Visible = append(p.Visible, r.home+"/dotfiles")
		if got := builtLinks(t, p); !slices.Equal(got, hiddenLinks[1:]) {
			t.Errorf("%v: HiddenLinks with the target's directory visible = %v, want %v", level, got, hiddenLinks[1:])
		}
		run(t, p, append([]probe{
			{"read-through-link", "test \"$(cat " + agents + ")\" = 'be kind'", true},
			{"read-through-chain", "test \"$(cat " + override + ")\" = override", true},
			{"write-through-link", "echo x >> " + agents, false},
			{"write-through-chain", "echo x >> " + override, false},
			{"write-target", "echo x >> " + r.work + "/src/dot.md", false},
			{"replace-link", "echo x > " + codex + "/sessions/c && mv " + codex + "/sessions/c " + agents, false},
			{"replace-link-in-chain", "echo x > " + codex + "/sessions/d && mv " + codex + "/sessions/d " + codex + "/chain.md", false},
			{"remove-link", "rm -f " + override, false},
			{"relink", "ln -sfn /etc/hostname " + agents, false},
			{"write-cli-state", "echo x > " + codex + "/sessions/s.jsonl", true},
		}, secrets...))
		// Without the mount namespace (a user's), Landlock alone: the
		// target still reads through the link, a write through it fails
		// where the target is not the run's to write, and the secrets
		// stay unread.
		p.Private = false
		run(t, p, append([]probe{
			{"read-through-link", "test \"$(cat " + agents + ")\" = 'be kind'", true},
			{"write-through-link", "echo x >> " + agents, false},
		}, secrets...))
		for name, body := range files {
			if b, err := os.ReadFile(name); err != nil || string(b) != body {
				t.Errorf("%v: %s = %q, %v; want %q untouched", level, name, b, err, body)
			}
		}
		for l, target := range links {
			if got, err := os.Readlink(l); err != nil || got != target {
				t.Errorf("%v: %s links to %q, %v; want %q", level, l, got, err, target)
			}
		}
		assertUntouched(t, r)
	}
}

// TestSandboxPrivateLinkCannotBeHeld: a link that a settings file leads
// through which cannot be held (to a file on an unbindable mount) is
// skipped, named by Unheld: the private roots and the other holds stand,
// and the link itself is held.
// A link through /proc (/proc/self/root leads anywhere) is not followed.
func TestSandboxPrivateLinkCannotBeHeld(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	codex := r.home + "/.codex"
	// Outside the private roots, which would give the run a clone of it.
	dir, err := os.MkdirTemp("/var/tmp", "clinvoke-unbindable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.WriteFile(dir+"/AGENTS.md", []byte("be kind"), 0o644); err != nil {
		t.Fatal(err)
	}
	for l, target := range map[string]string{
		codex + "/AGENTS.md":          dir + "/AGENTS.md",
		codex + "/AGENTS.override.md": "/proc/self/root" + r.work + "/src/b.txt",
	} {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	p := r.policy(WorkspaceWrite)
	p.Private, p.Writable, p.Tops = true, append(p.Writable, codex), nil
	p.Visible = append(p.Visible, dir)
	p.Settings = []string{codex + "/config.toml", codex + "/AGENTS.md", codex + "/AGENTS.override.md"}
	pl, why := planPrivate(p, followSettings(p.Settings))
	if pl == nil {
		t.Fatalf("no private roots: %s", why)
	}
	for _, f := range slices.Concat(pl.Settings, pl.Links) {
		if strings.HasPrefix(f, "/proc/") {
			t.Errorf("the plan holds %s, in /proc", f)
		}
	}
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	// Unbindable in the run's namespace only, once the private roots
	// made every mount a slave.
	clonedHook = func() {
		if err := unix.Mount("", dir, "", unix.MS_UNBINDABLE, ""); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { clonedHook = nil })
	name := "/tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root) + "-unheld"
	t.Cleanup(func() { os.Remove(name) })
	runBuilt(t, rs, p.Workdir, []probe{
		{"write-private-tmp", "echo x > " + name, true},
		{"read-through-link", "test \"$(cat " + codex + "/AGENTS.md)\" = 'be kind'", true},
		{"remove-link", "rm -f " + codex + "/AGENTS.md", false},
		{"remove-proc-link", "rm -f " + codex + "/AGENTS.override.md", false},
		{"replace-cli-config", "echo x > " + codex + "/sessions/c && mv " + codex + "/sessions/c " + codex + "/config.toml", false},
	})
	if ok, why := rs.Private(); !ok {
		t.Errorf("Private() = false (%s), want the private roots held", why)
	}
	if got := rs.Unheld(); len(got) != 1 || !strings.Contains(got[0], dir+"/AGENTS.md") {
		t.Errorf("Unheld() = %q, want the file on the unbindable mount", got)
	}
	if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s reached the host: %v", name, err)
	}
	assertUntouched(t, r)
}

// builtLinks returns the HiddenLinks of p's ruleset.
func builtLinks(t *testing.T, p Policy) []Link {
	t.Helper()
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	return rs.HiddenLinks()
}
