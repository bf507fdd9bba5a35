package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Workspace is a directory laid out for the tests of the path rules (what
// an Approval's Paths and Cwd say, and whether they lie in the workdir):
// W, the workdir; Outside, a directory beside it; W/link, a symbolic link
// to Outside; and Alias, a symbolic link to W. Base holds them, its own
// links resolved, so that a resolved path compares equal to them.
type Workspace struct {
	Base, W, Outside, Alias string
}

// NewWorkspace makes a Workspace in a temporary directory of t.
func NewWorkspace(t testing.TB) Workspace {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := Workspace{Base: base, W: filepath.Join(base, "w"), Outside: filepath.Join(base, "o"), Alias: filepath.Join(base, "alias")}
	for _, d := range []string{ws.W, ws.Outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ws.Outside, filepath.Join(ws.W, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws.W, ws.Alias); err != nil {
		t.Fatal(err)
	}
	return ws
}
