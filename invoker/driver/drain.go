package driver

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/clinvoke/clinvoke/internal/pipe"
)

// awaitReaders waits for stdout and stderr to reach end of file, once the
// tree has been killed. Every writer the containment knows is dead by now
// (at the cgroup level, every writer there is), so end of file comes as
// soon as the readers have consumed what is buffered, however much that is
// (a CLI may enlarge its pipe): a reader busy with a big line or a slow
// OnEvent is never cut off while it consumes what the tree wrote.
//
// Something outside the tree may still hold a stream open (an escapee the
// tracking level missed, or a descriptor handed to another process), and
// may keep writing. The wait delay bounds that, counted once from the
// sweep: at the delay, each open stream may still deliver what its pipe
// held at that moment, and is closed as soon as it has, or as soon as its
// reader waits on an empty pipe, whatever arrives later. It reports
// whether it had to close a stream.
func (r *run) awaitReaders(stdoutDone, stderrDone <-chan struct{}) (cut bool) {
	delay := r.cfg.waitDelay
	timer := time.NewTimer(delay)
	defer timer.Stop()
	streams := []struct {
		done <-chan struct{}
		w    *watchedFile
	}{{stdoutDone, r.stdoutW}, {stderrDone, r.stderrW}}
	var tick <-chan time.Time
	every := max(delay/10, time.Millisecond)
	for {
		open := 0
		for i := range streams {
			if streams[i].done != nil {
				open++
			}
		}
		if open == 0 {
			// A stream may also have been closed by its reader, after
			// reading what was buffered at the cut.
			return cut || r.stdoutW.closed.Load() || r.stderrW.closed.Load()
		}
		select {
		case <-streams[0].done:
			streams[0].done = nil
			continue
		case <-streams[1].done:
			streams[1].done = nil
			continue
		case <-timer.C:
			for _, st := range streams {
				if st.done != nil {
					st.w.cutOff()
				}
			}
			// Past the delay, look now and then for a reader left
			// waiting on an empty pipe by a writer that keeps it open.
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
		case <-tick:
		}
		for _, st := range streams {
			if st.done != nil && st.w.closeIfDrained(every) {
				r.log.Warn("output still open after the tree was killed; closed it at the wait delay", "wait_delay", delay)
				cut = true
			}
		}
	}
}

// watchedFile is our end of an output stream. It records since when a Read
// has been blocked (for the idle timeout and for awaitReaders), marks the
// run active on every read that returns data, and, once cut off at the
// wait delay, ends the stream after what was buffered then.
type watchedFile struct {
	f            *os.File
	r            *run
	pty          bool         // f is a PTY master
	blockedSince atomic.Int64 // nanoseconds since run start; 0 when not in Read
	eof          atomic.Bool  // a Read returned an error: nothing more comes
	total        atomic.Int64 // bytes read so far
	maxRead      atomic.Int64 // the largest size a Read has asked for
	// cut is set by cutOff: the stream ends once total reaches cutAt.
	cut    atomic.Bool
	cutAt  atomic.Int64
	closed atomic.Bool
}

func (w *watchedFile) Read(p []byte) (int, error) {
	if int64(len(p)) > w.maxRead.Load() {
		w.maxRead.Store(int64(len(p))) // only the reader writes it
	}
	w.blockedSince.Store(int64(time.Since(w.r.start)) | 1)
	n, err := w.f.Read(p)
	w.blockedSince.Store(0)
	if n > 0 {
		w.r.touch()
		if total := w.total.Add(int64(n)); w.cut.Load() && total >= w.cutAt.Load() {
			w.close()
			return n, io.EOF
		}
	}
	if w.pty && pipe.IsPTYEnd(err) {
		err = io.EOF // how a terminal reports that no process holds it
	}
	if err != nil {
		w.eof.Store(true)
	}
	return n, err
}

// cutOff marks the stream to end after what its pipe holds now. The count
// of bytes read is taken after the pipe's: what left the pipe before is
// then counted, except by at most one read still returning (the reader
// reads one at a time), so adding the largest read makes the stream
// deliver up to one read more than was buffered, never less.
func (w *watchedFile) cutOff() {
	buffered, ok := pipe.Buffered(w.f)
	if !ok {
		buffered = 0 // unknown: end when the reader waits on an empty pipe
	}
	w.cutAt.Store(w.total.Load() + w.maxRead.Load() + int64(buffered))
	w.cut.Store(true)
}

// closeIfDrained closes a cut-off stream whose reader has waited for at
// least wait on an empty pipe, or has read what was buffered at the cut,
// and reports whether it did. (A reader at end of file does not wait.)
func (w *watchedFile) closeIfDrained(wait time.Duration) bool {
	if w.closed.Load() || w.blockedFor() < wait {
		return false
	}
	if w.total.Load() >= w.cutAt.Load() {
		w.close()
		return true
	}
	if n, ok := pipe.Buffered(w.f); ok && n == 0 {
		w.close()
		return true
	}
	return false
}

func (w *watchedFile) close() {
	if !w.closed.Swap(true) {
		w.f.Close()
	}
}

// blockedFor returns how long the current Read has been blocked, or 0.
func (w *watchedFile) blockedFor() time.Duration {
	since := w.blockedSince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(w.r.start)-time.Duration(since), 1)
}
