package fakeagent

import (
	"os"
	"os/exec"
	"syscall"
)

// newSession detaches the started process into a new process group, the
// nearest Windows has to setsid.
func newSession() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// passReady does nothing: Windows cannot pass extra files, so the fake
// does not wait for its helpers to record themselves.
func passReady(cmd *exec.Cmd, ready *os.File) {}
