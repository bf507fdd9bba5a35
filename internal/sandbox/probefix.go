package sandbox

import (
	"errors"
	"fmt"
	"syscall"
)

// NameFix returns err, an error of Probe, with what to do named where
// Probe's own message gives only the kernel's answer: a Landlock system
// call refused with EPERM (or another errno it does not explain), as a
// container runtime's seccomp filter refuses the calls it does not know.
// Other errors, nil included, are returned as they are.
func NameFix(err error) error {
	var errno syscall.Errno
	if err == nil || !errors.Is(err, ErrUnavailable) || !errors.As(err, &errno) {
		return err
	}
	if errno == syscall.EPERM || errno == syscall.EACCES {
		return fmt.Errorf("%w: Landlock's system calls are refused (%w): a seccomp filter denies them, as a container runtime's default profile does: allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self in the container's seccomp profile (Docker: --security-opt seccomp=PROFILE), or run the program outside the container", ErrUnavailable, errno)
	}
	return fmt.Errorf("%w: Landlock's landlock_create_ruleset failed (%w): a seccomp filter or security module may deny it: allow the landlock_* system calls to this program", ErrUnavailable, errno)
}
