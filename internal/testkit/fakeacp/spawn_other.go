//go:build !unix

package fakeacp

import "syscall"

// newSession: without sessions, the escapee stays in the fake's group.
func newSession() *syscall.SysProcAttr { return nil }
