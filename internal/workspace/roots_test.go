package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		root, p string
		want    bool
	}{
		{"/srv/a", "/srv/a", true},
		{"/srv/a", "/srv/a/b/c", true},
		{"/srv/a", "/srv/ab", false},
		{"/srv/a", "/srv", false},
		{"/srv/a", "/srv/a/..b", true}, // a name starting with two dots
		{"/", "/anything", true},
	} {
		if got := Within(tc.root, tc.p); got != tc.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tc.root, tc.p, got, tc.want)
		}
	}
}

// TestExisting: a path is resolved as the kernel follows it, ".." after a
// link from the link's target; a missing part is an error that matches
// fs.ErrNotExist.
func TestExisting(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(base, "out", "deep")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deep, filepath.Join(base, "root", "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ p, want string }{
		{filepath.Join(base, "root", "link"), deep},
		{filepath.Join(base, "root", "link") + "/..", filepath.Join(base, "out")},
		{filepath.Join(base, "root") + "/./", filepath.Join(base, "root")},
	} {
		if got, err := Existing(tc.p); err != nil || got != tc.want {
			t.Errorf("Existing(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
	if _, err := Existing(filepath.Join(base, "root", "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Existing(missing) error = %v, want fs.ErrNotExist", err)
	}
}
