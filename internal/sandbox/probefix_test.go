package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestNameFix: a Landlock probe that failed with the kernel's bare errno
// gets the fix named, still matching ErrUnavailable and the errno; an
// error that names its fix already, and nil, stay as they are.
func TestNameFix(t *testing.T) {
	named := fmt.Errorf("%w: Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter", ErrUnavailable)
	for _, tc := range []struct {
		name  string
		err   error
		errno syscall.Errno
		want  string
	}{
		{"seccomp EPERM", fmt.Errorf("%w: Landlock: %w", ErrUnavailable, syscall.EPERM), syscall.EPERM, "seccomp profile"},
		{"another errno", fmt.Errorf("%w: Landlock: %w", ErrUnavailable, syscall.EINVAL), syscall.EINVAL, "allow the landlock_* system calls"},
		{"named already", named, 0, named.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NameFix(tc.err)
			if !errors.Is(got, ErrUnavailable) || !strings.Contains(got.Error(), tc.want) {
				t.Errorf("NameFix(%v) = %v, want ErrUnavailable naming %q", tc.err, got, tc.want)
			}
			if tc.errno != 0 && !errors.Is(got, tc.errno) {
				t.Errorf("NameFix(%v) = %v, no longer matching %v", tc.err, got, tc.errno)
			}
		})
	}
	if NameFix(nil) != nil {
		t.Error("NameFix(nil) is not nil")
	}
}
