//go:build unix

package fakeagent

import (
	"os"
	"os/exec"
	"syscall"
)

// newSession makes the started process call setsid: a new session and
// process group, out of reach of a signal to the fake's group.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// passReady gives the child ready as file descriptor 3.
func passReady(cmd *exec.Cmd, ready *os.File) {
	if ready == nil {
		return
	}
	cmd.ExtraFiles = []*os.File{ready}
	cmd.Env = append(cmd.Env, envReady+"=3")
}
