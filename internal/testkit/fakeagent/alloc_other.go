//go:build !linux

package fakeagent

// allocate returns n bytes, every page written.
func allocate(n int64) []byte { return allocateHeap(n) }
