//go:build !unix

package proc

// exhausted is Exhausted where neither Linux nor Unix: errors are
// returned as they are.
func exhausted(err error) error { return err }
