//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package driver

import (
	"errors"
	"os"
	"runtime"
)

func openPTY() (master, tty *os.File, err error) {
	return nil, nil, errors.New("not available on " + runtime.GOOS)
}

func isPTYEnd(error) bool { return false }
