package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettingsSameSizeRewriteWarned: a rewrite of the same size whose
// modification time the run set back (it owns the file) is still warned
// of: the file's change time, which no caller can set, moved.
func TestSettingsSameSizeRewriteWarned(t *testing.T) {
	f := filepath.Join(t.TempDir(), "CLAUDE.md")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	rs := &runSandbox{cli: "claude", seen: []settingsSeen{seeSettings(f)}}
	// The change time has a granularity of the kernel's tick: rewrite
	// until it moves, as a run writing at any time would.
	for ctimeOf(seeSettings(f).fi).Equal(ctimeOf(before)) {
		if err := os.WriteFile(f, []byte("y"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, before.ModTime(), before.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	if now, _ := os.Stat(f); now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
		t.Fatalf("rewrite: size %d, mtime %v; want %d, %v", now.Size(), now.ModTime(), before.Size(), before.ModTime())
	}
	if evs := rs.settingsWarnings(nil); len(evs) != 1 || !strings.Contains(evs[0].Text, "the run changed "+f) {
		t.Errorf("warnings %v, want one naming %s", evs, f)
	}
}
