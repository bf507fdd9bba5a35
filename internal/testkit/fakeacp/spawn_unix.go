//go:build unix

package fakeacp

import "syscall"

// newSession makes a process leave the fake's session and group.
func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
