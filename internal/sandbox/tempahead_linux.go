package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/clinvoke/clinvoke/internal/ahead"
	"golang.org/x/sys/unix"
)

// A run's private temporary directory is made ahead, off the start path:
// on a host whose temporary directory is on ext4 without a journal, a
// mkdir there skips the inodes freed in its block group in the last 30
// seconds, so that where runs follow each other (each removing its
// directory) one mkdir grew from 0.03 ms to 0.85 ms, the largest single
// cost of a sandboxed run's start. NewTemp takes the directory made ahead
// when there is one, and makes its own otherwise (the first run, or many
// at once); MakeTempAhead, which the run calls once its root has started,
// makes the next one in a goroutine of its own, once runs follow each
// other: from the second NewTemp of the process on, so that a program that
// sandboxes one run makes no directory it never uses.
//
// A directory made ahead is the same as one made by NewTemp: in the
// host's temporary directory, mode 0700, named by this process (so that a
// later program's sweep removes it if this one dies), used by one run
// only. It is taken only if it is still a directory of this user's, mode
// 0700, in the temporary directory in force when it is taken, and empty;
// else it is removed and a new one made. It is removed once tempIdle has
// passed with no NewTemp and no MakeTempAhead (internal/ahead's Pool).

// tempIdle is how long a directory made ahead waits for a run.
const tempIdle = 30 * time.Second

// tempPool holds the directory made ahead.
var tempPool = newTempPool()

// newTempPool returns a pool that makes one directory ahead.
func newTempPool() *ahead.Pool[string] {
	return ahead.New(ahead.Config[string]{
		Size: 1,
		Idle: tempIdle,
		Make: func() (string, error) {
			sweepOnce.Do(sweepTemps)
			return os.MkdirTemp("", tempPrefix+tempOwner())
		},
		Check:   tempFits,
		Release: func(dir string) { os.RemoveAll(dir) },
	})
}

// takeTemp returns the directory made ahead, or "" when there is none that
// may be taken.
func takeTemp() string {
	dir, _ := tempPool.Take()
	return dir
}

// tempFits reports whether dir, made ahead, is still what NewTemp would
// make: a directory of this user's, mode 0700, in the temporary directory
// in force now, with nothing in it.
func tempFits(dir string) bool {
	if filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
		return false
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByMe(fi) {
		return false
	}
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// MakeTempAhead makes, in a goroutine of its own, the directory the next
// NewTemp takes, unless there is one or a goroutine is at it already.
// Call it once a run's root has started, so that the mkdir does not
// compete with that start.
func MakeTempAhead() { tempPool.Fill() }

// drainTemp removes the directory made ahead that no run took, once the
// goroutine making it, if any, is done.
func drainTemp() { tempPool.Settle() }

// ownedByMe reports whether fi is of a file this process's user owns.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Getuid())
}

// removeTemp removes a run's temporary directory and everything in it. It
// asks for the directory's own removal first, which is all it takes when
// the run left nothing there (most runs: the fake CLI's cancel, say):
// os.RemoveAll would first try to unlink it as a file, a failed lookup of
// the path, some 4-7 µs of a sandboxed run's return on the loaded
// two-core machine (medians of 150 cancels under chrt -f 50: 51.5, 51.7
// and 47.8 µs against 47.5, 44.5 and 44.1). What a run did leave there
// (ENOTEMPTY, or anything else) is removed as os.RemoveAll does.
func removeTemp(dir string) error {
	if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return os.RemoveAll(dir)
}
