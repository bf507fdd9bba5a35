//go:build linux

package proc

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A sandboxed root gets its standard descriptors and Attr's files, and no
// other descriptor of the program: os.StartProcess leaves open in the
// child every descriptor without close-on-exec (one the program inherited
// from its own parent, or opened by cgo without the flag), and Landlock
// checks a file where it is opened, not where an open descriptor is
// used. Around a sandboxed fork, those descriptors are marked
// close-on-exec and cleared again afterwards (hideStray), so that the
// program's own later children get them as before.
//
// strayMu keeps two sandboxed forks from overlapping: one would take the
// other's marks for the program's own and leave them set. A fork
// elsewhere in the program (not sandboxed) inside that window misses the
// marked descriptors.
var strayMu sync.Mutex

// A strayFD is a descriptor hideStray marked, and the file it was then.
type strayFD struct {
	fd       int
	dev, ino uint64
}

// hideStray marks close-on-exec every descriptor of this process from 3
// up that lacks it, and returns the function that clears it again on
// those that still name the file they named; or an error where it cannot
// list them, or cannot mark one that is still open (those marked are
// cleared again then). A descriptor closed meanwhile (EBADF) needs no
// mark. The caller holds strayMu.
func hideStray() (restore func(), err error) {
	names, err := fdNames()
	if err != nil {
		return nil, fmt.Errorf("proc: list the descriptors a sandboxed run must not inherit: %w", err)
	}
	var marked []strayFD
	restore = func() {
		for _, m := range marked {
			// A descriptor closed and its number reused meanwhile (by a
			// file opened close-on-exec) is left as it is.
			var st unix.Stat_t
			if unix.Fstat(m.fd, &st) != nil || st.Dev != m.dev || st.Ino != m.ino {
				continue
			}
			if flags, err := unix.FcntlInt(uintptr(m.fd), unix.F_GETFD, 0); err == nil {
				unix.FcntlInt(uintptr(m.fd), unix.F_SETFD, flags&^unix.FD_CLOEXEC)
			}
		}
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		if err == nil {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
		switch {
		case err == nil:
			marked = append(marked, strayFD{fd, st.Dev, st.Ino})
		case !errors.Is(err, unix.EBADF):
			restore()
			return nil, fmt.Errorf("proc: mark descriptor %d close-on-exec, which a sandboxed run must not inherit: %w", fd, err)
		}
	}
	return restore, nil
}

// fdNames returns the names in /proc/self/fd: this process's descriptors,
// its own listing's among them. It reads the directory by getdents, at
// half the cost of an *os.File's.
func fdNames() ([]string, error) {
	d, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	var buf [4096]byte
	var names []string
	for {
		n, err := unix.Getdents(d, buf[:])
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
