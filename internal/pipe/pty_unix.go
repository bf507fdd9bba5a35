//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pipe

import (
	"errors"
	"os"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// OpenPTY opens a pseudo-terminal for PTY mode. The terminal passes output
// through unchanged (no "\n" to "\r\n") and does not echo, so stdout stays
// byte-exact JSONL, while ISIG stays on so that a Ctrl-C written to the
// master becomes SIGINT for the CLI's process group.
func OpenPTY() (master, tty *os.File, err error) {
	master, tty, err = pty.Open()
	if err != nil {
		return nil, nil, err
	}
	t, err := unix.IoctlGetTermios(int(tty.Fd()), ioctlGetTermios)
	if err == nil {
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ECHOCTL
		t.Lflag |= unix.ISIG
		err = unix.IoctlSetTermios(int(tty.Fd()), ioctlSetTermios, t)
	}
	if err == nil {
		master, err = pollable(master)
	}
	if err != nil {
		master.Close()
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// pollable returns f's descriptor in non-blocking mode as a new *os.File,
// and closes f. pty.Open leaves the master in blocking mode (it uses Fd),
// so a Read on it could not be interrupted by Close, and a process that
// escaped the sweep while holding the terminal would hang Invoke. A
// non-blocking descriptor is served by the runtime's poller, where Close
// ends a pending Read.
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return f, err
	}
	name := f.Name()
	f.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// IsPTYEnd reports whether err is how a PTY master reports that no process
// holds the terminal any more (EIO on Linux).
func IsPTYEnd(err error) bool { return errors.Is(err, syscall.EIO) }
