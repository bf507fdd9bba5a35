package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
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
// else it is removed and a new one made. It is removed once no run has
// taken it for tempIdle.

// tempIdle is how long a directory made ahead waits for a run.
const tempIdle = 30 * time.Second

// tempPool holds the directory made ahead.
var tempPool struct {
	mu      sync.Mutex
	ready   string         // made ahead, not taken; "" if none
	at      time.Time      // when ready was made
	filling bool           // a goroutine is making it
	news    int            // the NewTemps of this process, up to 2
	idle    *time.Timer    // removes ready (drainTemp)
	made    sync.WaitGroup // the goroutines making it
}

// takeTemp returns the directory made ahead, or "" when there is none that
// may be taken.
func takeTemp() string {
	p := &tempPool
	p.mu.Lock()
	p.news = min(p.news+1, 2)
	dir := p.ready
	p.ready = ""
	p.mu.Unlock()
	if dir == "" {
		return ""
	}
	if !tempFits(dir) {
		os.RemoveAll(dir)
		return ""
	}
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
func MakeTempAhead() {
	p := &tempPool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filling || p.ready != "" || p.news < 2 {
		return
	}
	p.filling = true
	p.made.Add(1)
	go fillTemp()
}

// fillTemp makes the directory ahead and keeps it until a run takes it
// or tempIdle passes.
func fillTemp() {
	defer tempPool.made.Done()
	sweepOnce.Do(sweepTemps)
	dir, err := os.MkdirTemp("", tempPrefix+tempOwner())
	p := &tempPool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filling = false
	if err != nil {
		return
	}
	if p.ready != "" {
		os.RemoveAll(dir)
		return
	}
	p.ready, p.at = dir, time.Now()
	if p.idle == nil {
		p.idle = time.AfterFunc(tempIdle, idleTemp)
	} else {
		p.idle.Reset(tempIdle)
	}
}

// drainTemp removes the directory made ahead that no run took.
func drainTemp() { dropTemp(true) }

// idleTemp, the idle timer's function, is drainTemp unless a directory
// was made again since the timer was set (the timer, reset, fires again).
func idleTemp() { dropTemp(false) }

// dropTemp removes the directory made ahead: always, or where it has
// waited tempIdle.
func dropTemp(always bool) {
	p := &tempPool
	p.mu.Lock()
	dir := p.ready
	if !always && time.Since(p.at) < tempIdle {
		dir = ""
	}
	if dir != "" {
		p.ready = ""
	}
	p.mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// ownedByMe reports whether fi is of a file this process's user owns.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Getuid())
}
