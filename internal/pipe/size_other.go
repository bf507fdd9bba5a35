//go:build !unix

package pipe

import (
	"errors"
	"os"
)

// Buffered cannot tell on this system how much f holds.
func Buffered(f *os.File) (int, bool) { return 0, false }

// SetSize is Linux only.
func SetSize(f *os.File, size int) (int, error) { return 0, errors.ErrUnsupported }
