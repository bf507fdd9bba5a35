//go:build unix && !linux

package pipe

import (
	"errors"
	"os"
)

const fionread = 0x4004667f // FIONREAD: _IOR('f', 127, int) on the BSDs and macOS

// SetSize is Linux only.
func SetSize(f *os.File, size int) (int, error) { return 0, errors.ErrUnsupported }
