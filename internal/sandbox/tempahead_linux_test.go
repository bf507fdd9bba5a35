package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// madeAhead has MakeTempAhead make a directory in a temporary directory
// of the test's own and returns it once made.
func madeAhead(t *testing.T) string {
	t.Helper()
	drainTemp()
	t.Setenv("TMPDIR", t.TempDir())
	takeTemp() // runs follow each other: two taken, none kept
	takeTemp()
	MakeTempAhead()
	tempPool.Wait()
	kept := tempPool.Kept()
	if len(kept) != 1 {
		t.Fatalf("MakeTempAhead made %v, want one directory", kept)
	}
	dir := kept[0]
	t.Cleanup(drainTemp)
	return dir
}

// TestNewTempTakesAhead: NewTemp takes the directory made ahead where it is
// still what NewTemp would make (this user's, mode 0700, empty, in the
// temporary directory in force), and only once; else it removes it and
// makes a new one, so that a run never gets what a fresh directory would
// not be.
func TestNewTempTakesAhead(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		taken  bool
	}{
		{"unchanged", func(*testing.T, string) {}, true},
		{"an entry in it", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "left"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another mode", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another owner", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("only root can give the directory away")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a link in its place", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"gone", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another TMPDIR", func(t *testing.T, _ string) { t.Setenv("TMPDIR", t.TempDir()) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ahead := madeAhead(t)
			tc.change(t, ahead)
			dir, remove, err := NewTemp()
			if err != nil {
				t.Fatal(err)
			}
			defer remove()
			if got := dir == ahead; got != tc.taken {
				t.Fatalf("NewTemp() = %s, made ahead %s: taken %v, want %v", dir, ahead, got, tc.taken)
			}
			if filepath.Dir(dir) != os.TempDir() {
				t.Errorf("NewTemp() = %s, not in TMPDIR %s", dir, os.TempDir())
			}
			fi, err := os.Lstat(dir)
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByMe(fi) {
				t.Errorf("NewTemp() = %s: %v, %v; want a directory of this user's, mode 0700", dir, fi, err)
			}
			if names, _ := os.ReadDir(dir); len(names) != 0 {
				t.Errorf("NewTemp() = %s holds %v, want nothing", dir, names)
			}
			if !tc.taken {
				if fi, err := os.Lstat(ahead); err == nil && fi.IsDir() {
					t.Errorf("the unfit directory %s made ahead was left", ahead)
				}
			}
			again, remove2, err := NewTemp()
			if err != nil {
				t.Fatal(err)
			}
			defer remove2()
			if again == dir || again == ahead {
				t.Errorf("a second NewTemp() = %s, the first's or the one made ahead", again)
			}
		})
	}
}

// TestTempAheadDrained: the directory made ahead that no run takes is
// removed once idle.
func TestTempAheadDrained(t *testing.T) {
	defer goleak.VerifyNone(t)
	ahead := madeAhead(t)
	drainTemp()
	if _, err := os.Lstat(ahead); !os.IsNotExist(err) {
		t.Errorf("the directory made ahead %s is left after drainTemp: %v", ahead, err)
	}
	dir, remove, err := NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if dir == ahead {
		t.Errorf("NewTemp() = %s, the removed directory made ahead", dir)
	}
}

// BenchmarkNewTemp is a run's temporary directory made and removed, as
// runs that follow each other make and remove theirs, in the host's
// temporary directory: made on the path ("fresh") against made ahead
// ("ahead", the making outside the timer). Only NewTemp and the removal
// are timed.
func BenchmarkNewTemp(b *testing.B) {
	for _, ahead := range []bool{false, true} {
		name := map[bool]string{false: "fresh", true: "ahead"}[ahead]
		b.Run(name, func(b *testing.B) {
			drainTemp()
			defer drainTemp()
			for i := 0; i < b.N; i++ {
				if ahead {
					b.StopTimer()
					MakeTempAhead()
					tempPool.Wait()
					b.StartTimer()
				}
				dir, remove, err := NewTemp()
				if err != nil {
					b.Fatal(err)
				}
				if err := remove(); err != nil {
					b.Fatalf("removing %s: %v", dir, err)
				}
			}
		})
	}
}

// TestTempAheadOnceRunsFollow: a process's first run makes no directory
// ahead (a program that sandboxes one run would leave it unused); from the
// second on, one is made for the next.
func TestTempAheadOnceRunsFollow(t *testing.T) {
	defer goleak.VerifyNone(t)
	drainTemp()
	t.Setenv("TMPDIR", t.TempDir())
	t.Cleanup(drainTemp)
	saved := tempPool
	tempPool = newTempPool() // the process's first run
	t.Cleanup(func() { tempPool.Close(); tempPool = saved })
	for run, want := range []bool{false, true} {
		_, remove, err := NewTemp()
		if err != nil {
			t.Fatal(err)
		}
		defer remove()
		MakeTempAhead()
		tempPool.Wait()
		made := len(tempPool.Kept()) != 0
		if made != want {
			t.Errorf("run %d: a directory made ahead: %v, want %v", run+1, made, want)
		}
	}
}

// TestRemoveTemp: a run's temporary directory is removed with whatever the
// run left in it, empty or not, and one already gone is no error.
func TestRemoveTemp(t *testing.T) {
	cases := []struct {
		name string
		fill func(t *testing.T, dir string)
	}{
		{"empty", func(*testing.T, string) {}},
		{"files and directories", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"f", "a/g", "a/b/h"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("/", filepath.Join(dir, "root")); err != nil {
				t.Fatal(err)
			}
		}},
		{"gone already", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.fill(t, dir)
			if err := removeTemp(dir); err != nil {
				t.Errorf("removeTemp() = %v, want nil", err)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after removeTemp, Lstat(%s) = %v, want it gone", dir, err)
			}
		})
	}
}
