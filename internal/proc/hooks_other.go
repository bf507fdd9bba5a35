//go:build !linux

package proc

// hooks are the tests' hooks into a tree's work, on Linux only.
type hooks struct{}
