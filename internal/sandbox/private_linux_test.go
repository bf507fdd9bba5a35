//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
// the run keeps the host's /tmp, and Private says why.
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
	if ok, why := rs.Private(); ok || !strings.Contains(why, r.work+"/src") {
		t.Errorf("Private() = %v, %q; want false, naming the hidden path", ok, why)
	}
	run(t, p, []probe{{"read-hidden", "cat " + r.work + "/src/b.txt", false}, {"write-tmp", "echo x > /tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root), false}})
}

// BenchmarkRestrict measures the forking thread's work for a ceiling
// with and without private roots (the namespace, the mounts, the binds of
// a rig beneath /tmp, the settings file held, the ruleset applied), the
// ruleset built beforehand and not timed.
func BenchmarkRestrict(b *testing.B) {
	requirePrivate(b)
	for _, private := range []bool{false, true} {
		b.Run(map[bool]string{false: "landlock", true: "private"}[private], func(b *testing.B) {
			r := newRig(b)
			p := r.policy(WorkspaceWrite)
			p.Private, p.Settings = private, []string{r.home + "/.codex/config.toml"}
			for b.Loop() {
				b.StopTimer()
				rs, err := Build(p)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				done := make(chan error, 1)
				go func() {
					runtime.LockOSThread() // never unlocked: retired with the goroutine
					done <- rs.Restrict()
				}()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				if ok, why := rs.Private(); ok != private {
					b.Fatalf("Private() = %v (%s)", ok, why)
				}
				rs.Close()
			}
		})
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
	pl, why := planPrivate(p)
	if pl == nil {
		t.Fatalf("planPrivate() = nil, %q", why)
	}
	got := map[string]bool{}
	for _, b := range pl.binds {
		got[b.path] = b.rw
	}
	for _, f := range []string{cfg, bin} {
		if rw, ok := got[f]; !ok || rw {
			t.Errorf("%s: planned %v, writable %v; want a read-only bind", f, ok, rw)
		}
	}
	if _, ok := got[r.home+"/.ssh/id_ed25519"]; ok {
		t.Errorf("the hidden key is planned as a bind: %v", pl.binds)
	}
	// A longer path that ends like one beneath /tmp names no /tmp path.
	p.Named = []string{"X=/var" + cfg, "--cache=/home/u" + bin}
	if pl, _ = planPrivate(p); pl != nil {
		for _, b := range pl.binds {
			if b.path == cfg || b.path == bin {
				t.Errorf("%s planned as a bind from a path that only ends like it", b.path)
			}
		}
	}
}
