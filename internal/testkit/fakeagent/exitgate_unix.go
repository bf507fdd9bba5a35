//go:build unix

package fakeagent

import (
	"os"
	"path/filepath"
	"syscall"
)

// NewExitGate makes a FIFO in dir for Script.ExitGate and returns its
// path and the function that opens it, letting the fake go on: call it
// once, after the fake's terminal event (an OnEvent of KindDone). The
// fake waits at the gate only once it has printed that event, so the
// function returns as soon as the fake reaches it.
func NewExitGate(dir string) (path string, open func() error, err error) {
	path = filepath.Join(dir, "exit-gate")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		return "", nil, err
	}
	return path, func() error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}, nil
}
