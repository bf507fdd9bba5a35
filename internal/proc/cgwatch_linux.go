//go:build linux

package proc

import (
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// One inotify instance serves every wait for a cgroup to empty: instances
// are few per user (128 by default), watches many. It exists while someone
// waits, and so does the goroutine that reads it (through the runtime's
// poller: no thread is blocked).
var theWatcher watcher

type watcher struct {
	mu      sync.Mutex
	f       *os.File // nil while nobody waits
	fd      int
	waiters map[int32][]chan struct{} // watch descriptor → waiters
}

// An eventsWatch is one waiter's watch of a cgroup.events file. Its
// channel receives a value (it holds one at most) after the file changes.
type eventsWatch struct {
	c  chan struct{}
	wd int32
}

// watchEvents watches path (a cgroup.events file) for changes. Look at
// the file after watching it, then after each receive on c; call close
// when done.
func watchEvents(path string) (*eventsWatch, error) {
	w := &theWatcher
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return nil, err
		}
		w.f, w.fd = os.NewFile(uintptr(fd), "inotify"), fd
		w.waiters = map[int32][]chan struct{}{}
		go readWatches(w.f)
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, unix.IN_MODIFY)
	if err != nil {
		w.closeIfIdleLocked()
		return nil, err
	}
	ew := &eventsWatch{c: make(chan struct{}, 1), wd: int32(wd)}
	w.waiters[ew.wd] = append(w.waiters[ew.wd], ew.c)
	return ew, nil
}

// close ends the watch.
func (ew *eventsWatch) close() {
	w := &theWatcher
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiters[ew.wd]
	for i, c := range list {
		if c == ew.c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) > 0 {
		w.waiters[ew.wd] = list
	} else {
		delete(w.waiters, ew.wd)
		// Fails harmlessly when the watch went with its file.
		unix.InotifyRmWatch(w.fd, uint32(ew.wd))
	}
	w.closeIfIdleLocked()
}

// closeIfIdleLocked closes the instance when nobody waits; its reader then
// returns.
func (w *watcher) closeIfIdleLocked() {
	if len(w.waiters) == 0 && w.f != nil {
		// Close waits for the reader's Read to return; the waiter that
		// closes need not.
		go w.f.Close()
		w.f, w.fd, w.waiters = nil, -1, nil
	}
}

// readWatches delivers the events of f until f is closed.
func readWatches(f *os.File) {
	w := &theWatcher
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		w.mu.Lock()
		if w.f == f {
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				for _, c := range w.waiters[ev.Wd] {
					select {
					case c <- struct{}{}:
					default:
					}
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
		w.mu.Unlock()
	}
}
