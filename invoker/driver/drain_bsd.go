//go:build unix && !linux

package driver

import (
	"errors"
	"os"
)

const fionread = 0x4004667f // FIONREAD: _IOR('f', 127, int) on the BSDs and macOS

// setPipeSize is Linux only.
func setPipeSize(f *os.File, size int) (int, error) { return 0, errors.ErrUnsupported }
