//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/workspace"
	"golang.org/x/sys/unix"
)

// nestedTree adds to the working directory work the held names below its
// top that a run must not change: a subdirectory's .claude settings and
// .mcp.json, a nested repository's config and hook, a .env two levels
// down, and a .env that is a symbolic link to a file beside it.
func nestedTree(t testing.TB, work string) {
	t.Helper()
	for _, d := range []string{"src/.claude", "pkg", "sub/.git/hooks", "src/deep", "lib"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"src/.claude/settings.json": "{}", "pkg/.mcp.json": "{}", "sub/.git/config": "[core]",
		"sub/.git/hooks/x": "#!/bin/sh\n", "src/deep/.env": "APP=1\n", "lib/dev.env": "APP=2\n",
		"sub/main.go": "package main\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("dev.env", filepath.Join(work, "lib/.env")); err != nil {
		t.Fatal(err)
	}
}

// fails is a probe's command that succeeds where cmd fails saying msg.
func fails(cmd, msg string) string {
	return "( " + cmd + " ) 2>&1 | grep -q '" + msg + "'"
}

const (
	erofs = "Read-only file system"
	ebusy = "Device or resource busy"
)

// TestSandboxNestedHeld: at WorkspaceWrite with the private roots, each
// held name below the top of the working directory that exists when the
// run starts is bound read-only over itself: a write to it (or into it,
// for a directory) fails with EROFS, a rename over it and its removal
// with EBUSY; a held name that is a symbolic link is held whole, the link
// and the file it ends at. The rest of the tree stays writable, and a
// held name the run makes is not held (a mount needs a source), nor one
// made where a directory holding a held name was renamed away.
func TestSandboxNestedHeld(t *testing.T) {
	requirePrivate(t)
	// A working directory beneath /tmp has its top's entries bound into
	// the private /tmp, the held names below them bound over those; one
	// elsewhere is the host's own tree.
	for _, base := range []string{"", "/var/tmp"} {
		t.Run("base="+base, func(t *testing.T) { nestedHeld(t, base) })
	}
}

// nestedHeld is TestSandboxNestedHeld for a working directory made in
// base, or the test's own directory where base is empty.
func nestedHeld(t *testing.T, base string) {
	r := newRig(t)
	if base != "" {
		work, err := os.MkdirTemp(base, "clinvoke-nested-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(work) })
		r.work = work
	}
	nestedTree(t, r.work)
	w := r.work
	if err := os.WriteFile(r.temp+"/new", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w+"/src/moved/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	var probes []probe
	for _, f := range []string{"src/.claude/settings.json", "pkg/.mcp.json", "sub/.git/config", "sub/.git/hooks/x", "src/deep/.env"} {
		path := w + "/" + f
		probes = append(probes,
			probe{"write:" + f, fails("echo x >> "+path, erofs), true},
			probe{"truncate:" + f, fails(": > "+path, erofs), true},
			probe{"rename-over:" + f, fails("cp "+r.temp+"/new "+r.temp+"/n && mv -f "+r.temp+"/n "+path, erofs+"\\|"+ebusy), true},
		)
	}
	probes = append(probes,
		probe{"remove-settings", fails("rm -f "+w+"/src/.claude/settings.json", erofs), true},
		probe{"remove-.claude", fails("rm -rf "+w+"/src/.claude", erofs), true},
		probe{"rename-.claude", fails("mv "+w+"/src/.claude "+w+"/src/c", ebusy), true},
		probe{"remove-.mcp.json", fails("rm -f "+w+"/pkg/.mcp.json", ebusy), true},
		probe{"remove-.env", fails("rm -f "+w+"/src/deep/.env", ebusy), true},
		probe{"rename-.git", fails("mv "+w+"/sub/.git "+w+"/sub/git", ebusy), true},
		probe{"new-hook", fails("echo x > "+w+"/sub/.git/hooks/pre-commit", erofs), true},
		probe{"write-through-link", fails("echo X=1 >> "+w+"/lib/.env", erofs), true},
		probe{"write-link-target", fails("echo X=1 >> "+w+"/lib/dev.env", erofs), true},
		probe{"relink", fails("ln -sfn other "+w+"/lib/.env", ebusy), true},
		probe{"write-beside", "echo x >> " + w + "/sub/main.go && echo x > " + w + "/pkg/new && mkdir " + w + "/src/deep/d", true},
		probe{"new-nested-name", "mkdir -p " + w + "/src/new/.claude && echo x > " + w + "/src/new/.claude/settings.json", true},
		// Open: the directory above a held name moves, the hold with it,
		// and a new one takes its name.
		probe{"rename-parent", "mv " + w + "/src/moved " + w + "/src/gone && " + fails("touch "+w+"/src/gone/.git/x", erofs) + " && mkdir -p " + w + "/src/moved/.git && touch " + w + "/src/moved/.git/x", true},
	)
	p, rs := r.builtPrivate(t)
	runBuilt(t, rs, p.Workdir, probes)
	assertPrivate(t, rs)
	if got := rs.Unheld(); len(got) != 0 {
		t.Errorf("Unheld = %q, want nothing", got)
	}
	for f, want := range map[string]string{
		"src/.claude/settings.json": "{}", "pkg/.mcp.json": "{}", "sub/.git/config": "[core]",
		"sub/.git/hooks/x": "#!/bin/sh\n", "src/deep/.env": "APP=1\n", "lib/dev.env": "APP=2\n",
	} {
		if b, err := os.ReadFile(filepath.Join(w, f)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want it untouched", f, b, err)
		}
	}
	if got, err := os.Readlink(w + "/lib/.env"); err != nil || got != "dev.env" {
		t.Errorf("lib/.env links to %q, %v; want dev.env", got, err)
	}
}

// builtPrivate builds r's policy at WorkspaceWrite with private roots,
// the ruleset closed at t's end.
func (r rig) builtPrivate(t *testing.T) (Policy, *Ruleset) {
	t.Helper()
	p := r.policy(WorkspaceWrite)
	p.Private = true
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return p, rs
}

// TestNestedWalk: the walk finds the held names below the top (the top's
// own are the ruleset's), enters neither a held name, nor a link, nor
// node_modules, follows a held name that is a link, and stops at its
// budget saying where; the same tree gives the same walk.
func TestNestedWalk(t *testing.T) {
	held := workspace.ConfigNames()
	cases := []struct {
		name   string
		budget walkBudget
		names  []string // relative to the working directory
		links  []string
		cut    string // a part of Cut, or "" for none
	}{
		{"whole", nestedBudget, []string{"far/.git", "pkg/.mcp.json", "src/.claude", "src/deep/.env", "sub/.git"}, []string{"lib/.env"}, ""},
		{"shallow", walkBudget{entries: 1000, depth: 1}, []string{"far/.git", "pkg/.mcp.json", "src/.claude", "sub/.git"}, []string{"lib/.env"}, "stopped at WORK/src/deep, past its depth of 1"},
		// The top's 8 entries and far's 1; lib's 2 would pass 10.
		{"few entries", walkBudget{entries: 10, depth: 32}, []string{"far/.git"}, nil, "stopped after 9 entries, at WORK/lib "},
	}
	work := t.TempDir()
	nestedTree(t, work)
	for _, d := range []string{".git/hooks", "node_modules/m/.git", "far/.git/x/.claude", "src/.claude/.git"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(work+"/src", work+"/srclink"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(work, work+"-link"); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := walkNested(work, held, c.budget)
			want := c.names
			cut := strings.ReplaceAll(c.cut, "WORK", work)
			var got, links []string
			for _, n := range w.Names {
				got = append(got, strings.TrimPrefix(n, work+"/"))
			}
			for _, l := range w.Links {
				links = append(links, strings.TrimPrefix(l.paths[0], work+"/"))
				if !l.held || !l.link || l.paths[len(l.paths)-1] != work+"/lib/dev.env" {
					t.Errorf("the link %s followed as %+v, want a held link ending at lib/dev.env", l.paths[0], l)
				}
			}
			if !slices.Equal(got, want) || !slices.Equal(links, c.links) {
				t.Errorf("walk found %q and links %q, want %q and %q", got, links, want, c.links)
			}
			if (w.Cut == "") != (cut == "") || !strings.Contains(w.Cut, cut) {
				t.Errorf("Cut = %q, want one saying %q", w.Cut, cut)
			}
			if again := walkNested(work, held, c.budget); !reflect.DeepEqual(again, w) {
				t.Errorf("a second walk of the same tree gave %+v, want %+v", again, w)
			}
			if linked := walkNested(work+"-link", held, c.budget); !reflect.DeepEqual(linked, w) {
				t.Errorf("the walk of a link to the tree gave %+v, want the tree's %+v", linked, w)
			}
		})
	}
}

// TestSandboxNestedWalkCut: a walk its budget cuts is reported as the
// run's held links that could not be held are (Unheld, a Warn record of
// the run's log), through the plan a first stage is handed too, and the
// names it reached before the cut are held.
func TestSandboxNestedWalkCut(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	nestedTree(t, r.work)
	saved := nestedBudget
	nestedBudget = walkBudget{entries: 1000, depth: 1}
	defer func() { nestedBudget = saved }()
	p, rs := r.builtPrivate(t)
	var pl privatePlan
	if err := json.Unmarshal(rs.PrivatePlan(), &pl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pl.Walk, r.work+"/src/deep") {
		t.Errorf("the plan's Walk = %q, want it to name %s/src/deep, where it stopped", pl.Walk, r.work)
	}
	runBuilt(t, rs, p.Workdir, []probe{
		{"write-nested-config", fails("echo x >> "+r.work+"/sub/.git/config", erofs), true},
		{"write-beyond-the-cut", "echo X=1 >> " + r.work + "/src/deep/.env", true},
	})
	if got := rs.Unheld(); len(got) != 1 || got[0] != pl.Walk {
		t.Errorf("Unheld = %q, want the walk's cut %q", got, pl.Walk)
	}
}

// TestNestedListDir: the walk lists a directory beneath the working
// directory's top only through no symbolic link: a directory replaced by a
// link (to one outside, or inside) since its parent was listed is not
// listed, nor is a path out of the top.
func TestNestedListDir(t *testing.T) {
	work, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{work + "/a/b", outside + "/secret/.git"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out": outside + "/secret", "in": "a", "a/up": ".."} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := newLister(work)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{".", true}, {"a", true}, {"a/b", true},
		{"out", false}, {"in", false}, {"in/b", false}, {"a/up", false}, {"..", false}, {outside, false},
	} {
		_, _, err := l.list(tc.path, true)
		if (err == nil) != tc.ok {
			t.Errorf("list(%q) = %v, want listed %v", tc.path, err, tc.ok)
		}
	}
}

// TestOpenat2Refused: where a container's seccomp profile refuses
// openat2 (ENOSYS), the holds and the walk open their paths by openat,
// and still hold the nested names.
func TestOpenat2Refused(t *testing.T) {
	saved := sysOpenat2
	sysOpenat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	defer func() { sysOpenat2 = saved }()
	work := t.TempDir()
	nestedTree(t, work)
	w := walkNested(work, workspace.ConfigNames(), nestedBudget)
	if !slices.Contains(w.Names, work+"/sub/.git") || w.Cut != "" {
		t.Errorf("walkNested() = %q, cut %q; want sub/.git found, no cut", w.Names, w.Cut)
	}
	fd, err := openat2(unix.AT_FDCWD, work+"/sub/.git", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		t.Fatalf("openat2() with the system call refused: %v", err)
	}
	unix.Close(fd)
}

// TestSandboxNestedLinkToDir: a nested repository whose .git is a
// symbolic link to a directory elsewhere in the working directory (as the
// repo tool lays projects out) has that directory held whole: a new hook
// and a write to its config are refused. A held name linked to a directory
// the working directory lies in is not held (it would hold the run's whole
// tree) and is named in Unheld.
func TestSandboxNestedLinkToDir(t *testing.T) {
	requirePrivate(t)
	r := newRig(t)
	w := r.work
	for _, d := range []string{"proj/sub", "store/sub.git/hooks", "up"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(w+"/store/sub.git/config", []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"proj/sub/.git": "../../store/sub.git", "up/.claude": ".."} {
		if err := os.Symlink(target, filepath.Join(w, link)); err != nil {
			t.Fatal(err)
		}
	}
	p, rs := r.builtPrivate(t)
	runBuilt(t, rs, p.Workdir, []probe{
		{"new-hook-through-link", fails("echo x > "+w+"/proj/sub/.git/hooks/pre-commit", erofs), true},
		{"write-config-through-link", fails("echo x >> "+w+"/proj/sub/.git/config", erofs), true},
		{"write-beside", "echo x > " + w + "/up/notes.txt", true},
	})
	if _, err := os.Stat(w + "/proj/sub/.git/hooks/pre-commit"); err == nil {
		t.Error("the hook was planted through the link")
	}
	if got := rs.Unheld(); len(got) != 1 || !strings.Contains(got[0], w+"/up/.claude") {
		t.Errorf("Unheld = %q, want the link to the working directory named", got)
	}
}

// BenchmarkNestedWalk pairs the private roots' plan of a working
// directory at WorkspaceWrite without the walk for held names below its
// top and with it: the working directory is this module's checkout, or
// the tree CLINVOKE_NESTED_TREE names (a copy of a large node_modules
// under another name, say).
func BenchmarkNestedWalk(b *testing.B) {
	work, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	if dir := os.Getenv("CLINVOKE_NESTED_TREE"); dir != "" {
		work = dir
	}
	p := Policy{Level: WorkspaceWrite, Workdir: work, Temp: b.TempDir(), Held: workspace.ConfigNames(), Private: true}
	saved := nestedBudget
	defer func() { nestedBudget = saved }()
	for _, c := range []struct {
		name   string
		budget walkBudget
	}{{"without", walkBudget{depth: -1}}, {"with", saved}} {
		b.Run(c.name, func(b *testing.B) {
			nestedBudget = c.budget
			var pl *privatePlan
			for b.Loop() {
				pl, _ = planPrivate(p, nil)
			}
			b.ReportMetric(float64(len(pl.Nested)), "names")
			if pl.Walk != "" && c.name == "with" {
				b.Logf("cut: %s", pl.Walk)
			}
		})
	}
}

// BenchmarkNestedHolds pairs the forking thread's work with the private
// roots (BenchmarkRestrict's "private") for a working directory without
// held names below its top and with 100 of them (a tree of vendored
// repositories, each a .git bound read-only over itself).
func BenchmarkNestedHolds(b *testing.B) {
	requirePrivate(b)
	for _, n := range []int{0, 100} {
		b.Run("names="+strconv.Itoa(n), func(b *testing.B) {
			r := newRig(b)
			for i := range n {
				if err := os.MkdirAll(filepath.Join(r.work, "src", "vendor", strconv.Itoa(i), ".git"), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			p := r.policy(WorkspaceWrite)
			p.Private = true
			benchRestrict(b, p)
		})
	}
}

// TestNestedWalkMount: the walk does not enter another mount below the
// top (a bind of the same file system here, whose device is the top's:
// a hung network mount would stall the run's start), and names it in
// Cut, as it does where openat2 is refused.
func TestNestedWalkMount(t *testing.T) {
	requirePrivate(t)
	work, other := t.TempDir(), t.TempDir()
	for _, d := range []string{work + "/vol", work + "/src/.git", other + "/.git/hooks", other + "/deep/.claude"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, refused := range []bool{false, true} {
		t.Run("openat2-refused="+strconv.FormatBool(refused), func(t *testing.T) {
			if refused {
				saved := sysOpenat2
				sysOpenat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
				defer func() { sysOpenat2 = saved }()
			}
			var w nestedWalk
			// The bind is the thread's own mount namespace's, and ends
			// with the thread.
			err := Retired(func() error {
				if err := ownMountNS(); err != nil {
					return err
				}
				if err := unix.Mount(other, work+"/vol", "", unix.MS_BIND, ""); err != nil {
					return err
				}
				w = walkNested(work, workspace.ConfigNames(), nestedBudget)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{work + "/src/.git"}; !slices.Equal(w.Names, want) {
				t.Errorf("walk found %q, want %q: nothing in the mount", w.Names, want)
			}
			if want := "did not enter " + work + "/vol, another mount"; !strings.Contains(w.Cut, want) {
				t.Errorf("Cut = %q, want one saying %q", w.Cut, want)
			}
		})
	}
}

// TestNestedWalkMarked: the walk lists a directory below the top that a
// tool marked as its own (a Python virtual environment's pyvenv.cfg, a
// cache's CACHEDIR.TAG with the specification's signature), holding its
// own held names, but enters none of its subdirectories; a tag without
// the signature, a marker that is no regular file, and the top's own
// marker are not followed.
func TestNestedWalkMarked(t *testing.T) {
	work := t.TempDir()
	for _, d := range []string{
		".venv/lib/python3/site-packages/p/.git", "target/debug/build/.git", "fake/sub/.git",
		"odd/pyvenv.cfg", "odd/sub/.git", "src/.claude",
	} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"pyvenv.cfg":            "home = /usr/bin\n",
		".venv/pyvenv.cfg":      "home = /usr/bin\n",
		".venv/.env":            "A=1\n",
		"target/CACHEDIR.TAG":   cacheDirSignature + "\n# This file is a cache directory tag created by cargo.\n",
		"fake/CACHEDIR.TAG":     "Signature: not the one\n",
		"target/debug/.env":     "A=2\n",
		"target/debug/keep.txt": "",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := walkNested(work, workspace.ConfigNames(), nestedBudget)
	var got []string
	for _, n := range w.Names {
		got = append(got, strings.TrimPrefix(n, work+"/"))
	}
	want := []string{".venv/.env", "fake/sub/.git", "odd/sub/.git", "src/.claude"}
	if !slices.Equal(got, want) || w.Cut != "" {
		t.Errorf("walk found %q, cut %q; want %q, no cut", got, w.Cut, want)
	}
}

// TestNestedWalkSince: a walk at the run's end names the held names below
// the top made since the walk at its start (in a directory that had none,
// in a new directory) and those replaced (the directory above renamed away
// and made again), but not one moved with its directory, nor the top's.
func TestNestedWalkSince(t *testing.T) {
	work := t.TempDir()
	nestedTree(t, work)
	w := &Walked{dir: work, held: workspace.ConfigNames()}
	w.found = walkNested(work, w.held, nestedBudget).Found
	if made, replaced := w.Since(); made != nil || replaced != nil {
		t.Fatalf("Since() of an unchanged tree = %q, %q; want nothing", made, replaced)
	}
	for _, d := range []string{"pkg/.git/hooks", "new/.claude", ".codex"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(work+"/src", work+"/moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(work+"/src/.claude", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pkg/.git/hooks/pre-commit", "new/.claude/settings.json", "src/.claude/settings.json"} {
		if err := os.WriteFile(filepath.Join(work, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	made, replaced := w.Since()
	if want := []string{work + "/new/.claude", work + "/pkg/.git"}; !slices.Equal(made, want) {
		t.Errorf("Since() made %q, want %q", made, want)
	}
	if want := []string{work + "/src/.claude"}; !slices.Equal(replaced, want) {
		t.Errorf("Since() replaced %q, want %q", replaced, want)
	}
}

// TestNestedWalkSinceMarks: the walk at the run's end honours only the
// tools' marks the walk at its start found: a pyvenv.cfg or a signed
// CACHEDIR.TAG the run planted above a held name it made does not hide it,
// while a virtual environment there from the start is still not entered.
func TestNestedWalkSinceMarks(t *testing.T) {
	work := t.TempDir()
	for _, d := range []string{"lib/sub", "cache/sub", "venv/lib"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(work+"/venv/pyvenv.cfg", []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := walkNested(work, workspace.ConfigNames(), nestedBudget)
	w := &Walked{dir: work, held: workspace.ConfigNames(), found: start.Found, marked: start.Marked}
	if want := []string{work + "/venv"}; !slices.Equal(start.Marked, want) {
		t.Fatalf("the start walk's marks = %q, want %q", start.Marked, want)
	}
	for _, d := range []string{"lib/sub/.git", "cache/sub/.git", "venv/lib/.git"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(work+"/lib/pyvenv.cfg", []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(work+"/cache/CACHEDIR.TAG", []byte("Signature: 8a477f597d28d172789f06886806bc55\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	made, _ := w.Since()
	if want := []string{work + "/cache/sub/.git", work + "/lib/sub/.git"}; !slices.Equal(made, want) {
		t.Errorf("Since() made %q, want %q (the planted marks honoured, or the start's not)", made, want)
	}
}
