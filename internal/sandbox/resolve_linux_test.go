//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// resolve answers as filepath.EvalSymlinks does, path and error, for a
// path with no link on the way (its fast path) and for every other kind:
// a link in the middle, at the end, relative, to a link, dangling, a loop,
// a missing path, a file where a directory should be.
func TestResolveAsEvalSymlinks(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir) // the temporary directory may be reached through a link
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p string) string { return filepath.Join(real, p) }
	for _, d := range []string{"a/b/c", "x"} {
		if err := os.MkdirAll(mk(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(mk("a/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"a/mid":     mk("a/b"),
		"a/rel":     "b/c",
		"a/chain":   "rel",
		"a/dangle":  "nowhere",
		"a/loop1":   "loop2",
		"a/loop2":   "loop1",
		"x/up":      "../a",
		"a/b/tofil": "../file",
	} {
		if err := os.Symlink(target, mk(link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{
		real, mk("a"), mk("a/b/c"), mk("a/file"),
		mk("a/mid"), mk("a/mid/c"), mk("a/rel"), mk("a/chain"), mk("x/up/b/c"), mk("a/b/tofil"),
		mk("a/dangle"), mk("a/loop1"), mk("a/missing"), mk("a/file/under"), mk("a/missing/under"),
		dir, "/", "/proc/self/exe",
	} {
		got, gotErr := resolve(p)
		want, wantErr := filepath.EvalSymlinks(p)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("resolve(%s) = %q, %v; EvalSymlinks gives %q, %v", p, got, gotErr, want, wantErr)
		}
	}
}

// BenchmarkPlanPrivate is the private roots' plan of a policy like the
// driver's (BenchmarkBuild's, at ReadOnly), with this process's whole
// environment named as a run's is: the settings and held names followed,
// the links into hidden paths looked for, and the plan made, as Build
// does for each run.
func BenchmarkPlanPrivate(b *testing.B) {
	p := benchPolicy(b, ReadOnly)
	p.Named = append(p.Named, os.Environ()...)
	p.Named = append(p.Named, "TMPDIR="+p.Temp)
	for b.Loop() {
		chains := followSettings(p.Settings)
		hiddenLinks(p, chains)
		chains = append(chains, followHeld(p)...)
		if pl, why := planPrivate(p, chains); pl == nil {
			b.Fatalf("planPrivate() = nil, %q", why)
		}
	}
}
