//go:build !linux

package proc

// ignores is false: elsewhere the ladder sends every step.
func (t *Tree) ignores(Signal) bool { return false }
