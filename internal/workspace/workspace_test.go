package workspace

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// layout makes a working directory w and a directory outside it, o, with
// links inside w that lead out of it and back in, and returns both (as
// real paths).
func layout(t *testing.T) (w, o string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, o = filepath.Join(base, "w"), filepath.Join(base, "o")
	for _, d := range []string{w, o, filepath.Join(w, "sub", "deep"), filepath.Join(o, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(w, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"out":      o,                           // absolute, leaves w
		"outrel":   "../o",                      // relative, leaves w
		"in":       "sub",                       // stays inside
		"chain":    "out/dir",                   // a link through a link
		"loop":     "loop",                      // loops
		"root":     "/",                         // the root
		"sub/back": "../..",                     // from w/sub to w's parent
		"dangling": filepath.Join(o, "made.md"), // to a file that does not exist
		"cfg":      ".claude",                   // a name that is not configuration, to one that is
	} {
		if err := os.Symlink(target, filepath.Join(w, link)); err != nil {
			t.Fatal(err)
		}
	}
	return w, o
}

func TestOutside(t *testing.T) {
	w, o := layout(t)
	home := filepath.Join(w, "codex-home")
	r := New(w, []string{"CODEX_HOME=" + home})
	tests := []struct {
		path, cwd string
		// want is a part of the reason, or "" for inside.
		want string
	}{
		{path: filepath.Join(w, "a.go")},
		{path: filepath.Join(w, "new", "dir", "a.go")},
		{path: w},
		{path: "a.go"},
		{path: filepath.Join("sub", "a.go")},
		{path: "a.go", cwd: filepath.Join(w, "sub")},
		{path: "a.go", cwd: "sub"},
		{path: filepath.Join(w, "in", "a.go")},
		{path: filepath.Join(w, "missing", "..", "a.go")},
		{path: filepath.Join(w, ".gitignore")},
		{path: filepath.Join(w, ".env.example")},
		{path: filepath.Join(w, ".envrc")},
		{path: filepath.Join(w, "sub", "deep", "..", "a.go")},

		{path: filepath.Join(o, "a.go"), want: "outside the working directory"},
		{path: w + "x", want: "outside the working directory"},
		{path: filepath.Join(w, "out", "pwned.txt"), want: "outside the working directory"},
		{path: filepath.Join(w, "outrel", "pwned.txt"), want: "outside the working directory"},
		{path: filepath.Join(w, "chain", "pwned.txt"), want: "outside the working directory"},
		{path: filepath.Join(w, "root", "etc", "x"), want: "outside the working directory"},
		{path: filepath.Join(w, "sub", "back", "o", "x"), want: "outside the working directory"},
		{path: filepath.Join(w, "dangling"), want: "outside the working directory"},
		{path: filepath.Join(w, "missing", "..", "..", "x"), want: "outside the working directory"},
		{path: filepath.Join("..", "o", "x"), want: "outside the working directory"},
		{path: "x", cwd: o, want: "outside the working directory"},
		// ".." after a link: the kernel goes up from the link's target
		// (outside), Node's path.resolve from the link (inside); both
		// readings must be inside.
		{path: w + "/out/../x", want: "outside the working directory"},
		{path: filepath.Join(w, "loop", "x"), want: "too many levels of symbolic links"},
		{path: filepath.Join(w, "file.txt", "x"), want: "not a directory"},

		{path: filepath.Join(w, ".claude", "settings.json"), want: ".claude"},
		{path: filepath.Join(w, "sub", ".git", "hooks", "pre-commit"), want: ".git"},
		{path: filepath.Join(w, ".gemini", "GEMINI.md"), want: ".gemini"},
		{path: filepath.Join(w, ".Codex", "config.toml"), want: ".codex"},
		{path: filepath.Join(w, ".agents", "skills", "x.md"), want: ".agents"},
		{path: filepath.Join(w, ".mcp.json"), want: ".mcp.json"},
		{path: filepath.Join(w, ".env"), want: ".env"},
		{path: ".env", cwd: "sub", want: ".env"},
		{path: filepath.Join(w, ".ENV"), want: ".env"},
		{path: filepath.Join(w, "cfg", "settings.json"), want: ".claude"},
		{path: filepath.Join(home, "config.toml"), want: "configuration home"},

		{path: "~/x", want: "starts with ~"},
		{path: "", want: "no file"},
		{path: "a\x00b", want: "NUL"},
	}
	for _, tt := range tests {
		got := r.Outside(tt.path, tt.cwd)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Outside(%q, %q) = %q, want %q", tt.path, tt.cwd, got, tt.want)
		}
	}
}

// TestOutsideThroughLinkedWorkdir checks a working directory given by a
// path through a link: paths through its name and through its real path
// are both inside.
func TestOutsideThroughLinkedWorkdir(t *testing.T) {
	w, o := layout(t)
	alias := filepath.Join(o, "alias")
	if err := os.Symlink(w, alias); err != nil {
		t.Fatal(err)
	}
	r := New(alias, nil)
	for _, p := range []string{filepath.Join(alias, "a"), filepath.Join(w, "a"), "a"} {
		if got := r.Outside(p, ""); got != "" {
			t.Errorf("Outside(%q) = %q, want inside", p, got)
		}
	}
	if got := r.Outside(filepath.Join(o, "a"), ""); got == "" {
		t.Errorf("Outside(%q) = inside, want outside", filepath.Join(o, "a"))
	}
}

func TestOutsideWithoutWorkdir(t *testing.T) {
	for _, r := range []*Root{{}, New("", nil), New("relative", nil)} {
		if got := r.Outside("/a", ""); got == "" {
			t.Errorf("Outside() of a Root without a working directory = inside")
		}
	}
}

func TestConfigHomeFromHost(t *testing.T) {
	w, _ := layout(t)
	t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(w, "claude-config"))
	r := New(w, nil)
	if got := r.Outside(filepath.Join(w, "claude-config", "CLAUDE.md"), ""); !strings.Contains(got, "configuration home") {
		t.Errorf("Outside() of a file of the host's CLAUDE_CONFIG_DIR = %q, want the configuration home", got)
	}
}

// TestAbs checks the forms of a path an Approval reports: absolute, clean,
// the links of its existing part followed, relative paths taken in the
// working directory (or cwd), and one form per reading where the kernel's
// and Node's readings of ".." differ or a leading "~" may mean the home.
func TestAbs(t *testing.T) {
	w, o := layout(t)
	home := filepath.Join(o, "home")
	r := New(w, []string{"HOME=" + home})
	tests := []struct {
		path, cwd string
		want      []string
	}{
		{path: filepath.Join(w, "a.go"), want: []string{filepath.Join(w, "a.go")}},
		{path: "a.go", want: []string{filepath.Join(w, "a.go")}},
		{path: "./sub//a.go", want: []string{filepath.Join(w, "sub", "a.go")}},
		{path: "a.go", cwd: "sub", want: []string{filepath.Join(w, "sub", "a.go")}},
		{path: "a.go", cwd: o, want: []string{filepath.Join(o, "a.go")}},
		{path: filepath.Join(w, "new", "dir", "a.go"), want: []string{filepath.Join(w, "new", "dir", "a.go")}},
		{path: filepath.Join(w, "out", "pwned.txt"), want: []string{filepath.Join(o, "pwned.txt")}},
		{path: filepath.Join(w, "chain", "x"), want: []string{filepath.Join(o, "dir", "x")}},
		{path: filepath.Join(w, "dangling"), want: []string{filepath.Join(o, "made.md")}},
		{path: filepath.Join(w, "missing", "..", "a.go"), want: []string{filepath.Join(w, "a.go")}},
		// ".." after a link: the kernel's reading (from the link's
		// target), then Node's (from the link).
		{path: w + "/out/../x", want: []string{filepath.Join(filepath.Dir(o), "x"), filepath.Join(w, "x")}},
		{path: "~/x", want: []string{filepath.Join(w, "~", "x"), filepath.Join(home, "x")}},
		{path: "~", want: []string{filepath.Join(w, "~"), home}},
		{path: "~other/x", want: []string{filepath.Join(w, "~other", "x")}},
		// What cannot be resolved is reported clean.
		{path: filepath.Join(w, "loop", "x"), want: []string{filepath.Join(w, "loop", "x")}},
		{path: "", want: nil},
	}
	for _, tt := range tests {
		got := r.Abs(tt.path, tt.cwd)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Abs(%q, %q) = %q, want %q", tt.path, tt.cwd, got, tt.want)
		}
		for _, p := range got {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Errorf("Abs(%q, %q) holds %q, which is not absolute and clean", tt.path, tt.cwd, p)
			}
		}
	}
}

// TestDirThroughLink checks that a working directory given through a link
// is reported by its real path, and that the paths in it are reported
// under that same form, so that they compare.
func TestDirThroughLink(t *testing.T) {
	w, o := layout(t)
	alias := filepath.Join(o, "alias")
	if err := os.Symlink(w, alias); err != nil {
		t.Fatal(err)
	}
	r := New(alias, nil)
	if got := r.Dir(); got != w {
		t.Errorf("Dir() = %q, want the real %q", got, w)
	}
	if got := r.Abs("a.go", ""); !slices.Equal(got, []string{filepath.Join(w, "a.go")}) {
		t.Errorf("Abs(%q) = %q, want it under %q", "a.go", got, w)
	}
	for _, r := range []*Root{{}, New("relative", nil)} {
		if got := r.Dir(); got != "" {
			t.Errorf("Dir() of a Root without a working directory = %q, want empty", got)
		}
		if got := r.Abs("a", ""); got != nil {
			t.Errorf("Abs(%q) of a Root without a working directory = %q, want none", "a", got)
		}
	}
}

// TestOutsideHeldLinkTarget checks that a configuration name at the top
// of the working directory that is a symbolic link (.env -> .env.local, a
// common layout) holds the file it leads to as well: that file, by any
// path, is outside, as are the files beneath a directory it leads to; a
// file beside the target is not.
func TestOutsideHeldLinkTarget(t *testing.T) {
	w, _ := layout(t)
	for _, d := range []string{"tools", "shared/claude", "config"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		".env":       ".env.local",     // a sibling that does not exist yet
		".mcp.json":  "tools/mcp.json", // beneath
		".claude":    "shared/claude",  // a directory
		".agents":    "config/hop",     // a link to a link
		"config/hop": "agents.md",
		".gemini":    "sub", // through which sub/deep is held
	} {
		if err := os.Symlink(target, filepath.Join(w, link)); err != nil {
			t.Fatal(err)
		}
	}
	r := New(w, nil)
	tests := []struct {
		path, cwd string
		want      string // a part of the reason, or "" for inside
	}{
		{path: filepath.Join(w, ".env.local"), want: ".env"},
		{path: ".env.local", want: ".env"},
		{path: "mcp.json", cwd: "tools", want: ".mcp.json"},
		{path: filepath.Join(w, "tools", "..", "tools", "mcp.json"), want: ".mcp.json"},
		{path: filepath.Join(w, "shared", "claude", "settings.json"), want: ".claude"},
		{path: filepath.Join(w, "config", "agents.md"), want: ".agents"},
		{path: filepath.Join(w, "config", "hop"), want: ".agents"},
		{path: filepath.Join(w, "sub", "deep", "x"), want: ".gemini"},

		{path: filepath.Join(w, ".env.example")},
		{path: filepath.Join(w, "tools", "other.json")},
		{path: filepath.Join(w, "shared", "x")},
		{path: filepath.Join(w, "config", "other.md")},
	}
	for _, tt := range tests {
		got := r.Outside(tt.path, tt.cwd)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Outside(%q, %q) = %q, want %q", tt.path, tt.cwd, got, tt.want)
		}
	}
}
