//go:build !unix

package invoker

import (
	"errors"
	"os"
)

// bufferedBytes cannot tell on this system how much f holds.
func bufferedBytes(f *os.File) (int, bool) { return 0, false }

// setPipeSize is Linux only.
func setPipeSize(f *os.File, size int) (int, error) { return 0, errors.ErrUnsupported }
