//go:build linux

package proc

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// goLocked runs f in a new goroutine locked to an OS thread that is not
// the process's main thread, and returns at once. When f returns, the
// goroutine unlocks the thread, or, if f says to retire it, ends with it
// locked, so that the runtime ends the thread.
//
// Not the main thread: a thread that joins a tree's cgroup v1 memory
// cgroup must not be the thread-group leader, which owns the process's
// address space: every page the host touches is charged to the memory
// cgroup of the owner, so the host would allocate in the tree's cgroup
// under its limit (seen on Linux 6.18: a host whose main thread forked
// into a tree at its limit waited on the tree's OOM for ever). A
// goroutine that finds itself on the main thread hands f to another,
// which cannot run there while the first holds the main thread locked.
func goLocked(f func() (retire bool)) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			locked := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(locked)
				if !f() {
					runtime.UnlockOSThread()
				}
			}()
			<-locked
			runtime.UnlockOSThread()
			return
		}
		if !f() {
			runtime.UnlockOSThread()
		}
	}()
}
