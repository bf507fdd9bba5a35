package fakeagent

import "syscall"

// allocate returns n bytes of anonymous memory, every page resident: the
// kernel fills them in (MAP_POPULATE), without a write from Go code, which
// the race detector would shadow.
func allocate(n int64) []byte {
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return allocateHeap(n)
	}
	return b
}
