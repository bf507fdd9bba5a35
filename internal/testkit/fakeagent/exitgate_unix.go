//go:build unix

package fakeagent

import (
	"path/filepath"
	"syscall"
)

// NewExitGate makes the FIFOs of Script.ExitGate in dir and returns the
// path to set and the function that opens the gate: call it after the
// fake's terminal event (an OnEvent of KindDone), once per such event. It
// returns once the fake has done its TouchAtExit. The fake waits at the
// gate only once it has printed that event, so neither side waits long.
func NewExitGate(dir string) (path string, open func() error, err error) {
	path = filepath.Join(dir, "exit-gate")
	for _, p := range []string{path, path + ".passed"} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			return "", nil, err
		}
	}
	return path, func() error {
		if err := writeFIFO(path); err != nil {
			return err
		}
		return readFIFO(path + ".passed")
	}, nil
}
