package fakeagent

import "errors"

// NewExitGate reports that Windows has no FIFO for Script.ExitGate.
func NewExitGate(dir string) (path string, open func() error, err error) {
	return "", nil, errors.New("fakeagent: no exit gate on Windows (it needs a FIFO)")
}
