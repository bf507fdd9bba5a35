//go:build !linux

package proc

// prepare has nothing to open ahead outside Linux.
func (t *Tree) prepare() {}
