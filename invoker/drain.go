package invoker

import (
	"io"
	"os"
	"sync/atomic"
	"time"
)

// awaitReaders waits for stdout and stderr to reach end of file. The tree
// is dead by now, so that happens as soon as the readers have consumed what
// the CLI wrote. Only if a reader then sits blocked for the whole wait delay
// with nothing arriving — something the sweep could not find holds the pipe
// — is our end closed, which ends the read. A reader still busy with a big
// line or a slow OnEvent is never cut off. (A writer the sweep missed that
// keeps writing is cut off by watchedFile.Read.)
func (r *run) awaitReaders(stdoutDone, stderrDone <-chan struct{}) {
	delay := r.e.cfg.waitDelay
	t := time.NewTimer(delay)
	defer t.Stop()
	type stream struct {
		done <-chan struct{}
		w    *watchedFile
	}
	streams := []*stream{{stdoutDone, r.stdoutW}, {stderrDone, r.stderrW}}
	for {
		pending := streams[:0:0]
		for _, st := range streams {
			if st.done != nil {
				pending = append(pending, st)
			}
		}
		if len(pending) == 0 {
			return
		}
		select {
		case <-streams[0].done:
			streams[0].done = nil
		case <-streams[1].done:
			streams[1].done = nil
		case <-t.C:
			next := delay
			for _, st := range pending {
				switch blocked := st.w.blockedFor(); {
				case blocked > 0 && blocked >= delay:
					r.log.Warn("output still open after the tree was killed; closing it", "wait_delay", delay)
					st.w.f.Close()
				case blocked > 0:
					next = min(next, delay-blocked)
				}
			}
			t.Reset(max(next, time.Millisecond))
		}
	}
}

// watchedFile is our end of an output stream. It records since when a Read
// has been blocked, so awaitReaders can tell a stream nobody writes to any
// more from one whose reader is busy, and it marks the run active on every
// read that returns data (for the idle timeout).
type watchedFile struct {
	f            *os.File
	r            *run
	pty          bool         // f is a PTY master
	blockedSince atomic.Int64 // nanoseconds since run start; 0 when not in Read
	swept        atomic.Bool  // the tree has been killed
	afterSweep   atomic.Int64 // bytes read since then
}

// maxLeftover bounds what dead writers can have left in a stream when the
// sweep ends: a pipe holds at most fs.pipe-max-size (1 MiB by default), a
// terminal far less. More than that means a live writer the sweep missed.
const maxLeftover = 1<<20 + 64<<10

func (w *watchedFile) Read(p []byte) (int, error) {
	w.blockedSince.Store(int64(time.Since(w.r.start)) | 1)
	n, err := w.f.Read(p)
	w.blockedSince.Store(0)
	if n > 0 {
		w.r.touch()
		if w.swept.Load() && w.afterSweep.Add(int64(n)) > maxLeftover {
			w.r.log.Warn("a process the sweep could not find still writes to the CLI's output; closing it")
			w.f.Close()
			return n, io.EOF
		}
	}
	if w.pty && isPTYEnd(err) {
		err = io.EOF // how a terminal reports that no process holds it
	}
	return n, err
}

// blockedFor returns how long the current Read has been blocked, or 0.
func (w *watchedFile) blockedFor() time.Duration {
	since := w.blockedSince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(w.r.start)-time.Duration(since), 1)
}
