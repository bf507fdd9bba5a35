//go:build !unix

package driver

import (
	"errors"
	"os"
)

// bufferedBytes cannot tell on this system how much f holds.
func bufferedBytes(f *os.File) (int, bool) { return 0, false }

// setPipeSize is Linux only.
func setPipeSize(f *os.File, size int) (int, error) { return 0, errors.ErrUnsupported }
