//go:build linux

package proc

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The cgroupfs primitives, v2 and v1 alike: the writes of a limit, the
// reads of a number, a keyed file or a list of processes. Each takes the
// path of the file, so that the tests lay out a fake cgroupfs in a
// temporary directory.

// writeFile writes v to an existing file (a cgroup file), truncating it as
// a plain file would be (cgroupfs ignores the truncation).
func writeFile(path, v string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(v)); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// writeLimit writes n to a limit file, or "max" for 0.
func writeLimit(path string, n int64) error {
	if n == 0 {
		return writeFile(path, "max")
	}
	return writeFile(path, strconv.FormatInt(n, 10))
}

// listPids reads a cgroup.procs or tasks file.
func listPids(path string) []int32 { return appendPids(nil, path) }

// appendPids appends to pids those in a cgroup.procs or tasks file.
func appendPids(pids []int32, path string) []int32 {
	b, err := os.ReadFile(path)
	if err != nil {
		return pids
	}
	for f := range bytes.FieldsSeq(b) {
		if n, err := strconv.ParseInt(string(f), 10, 32); err == nil {
			pids = append(pids, int32(n))
		}
	}
	return pids
}

// unheld is the held descriptor of readSmall and readInt for a file that
// is not held open: they open it.
const unheld = -1

// readSmall reads a small file (a cgroup or /proc file) with one read into
// a buffer of 4 KiB, without the stat that os.ReadFile makes. held is a
// descriptor of path opened ahead (see Tree.Prepare), read from its start
// with a pread, or unheld: then path is opened for the read and closed.
func readSmall(path string, held int) ([]byte, error) {
	fd := held
	if held < 0 {
		var err error
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		defer unix.Close(fd)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return buf[:n], nil
}

// readInt reads a file holding one number ("max" reads as -1), through
// held as readSmall does.
func readInt(path string, held int) (int64, error) {
	b, err := readSmall(path, held)
	if err != nil {
		return 0, err
	}
	return parseInt(b)
}

// parseInt parses a file holding one number ("max" is -1).
func parseInt(b []byte) (int64, error) {
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return -1, nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// keyed returns the value of key in a flat keyed file ("key value" lines,
// as cpu.stat, memory.events and pids.events), or 0.
func keyed(b []byte, key string) int64 {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key+" ")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
