package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File returns a duplicate of the ruleset's descriptor (close-on-exec),
// for a process that applies the ruleset itself (RestrictSelf) just
// before it executes the run's program. The caller closes it.
func (r *Ruleset) File() (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: duplicate the ruleset: %w", err)
	}
	return os.NewFile(uintptr(fd), "landlock-ruleset"), nil
}

// RestrictSelf applies the ruleset open at fd (File's) to the calling
// thread, locked and about to execute the run's program, as
// Ruleset.Restrict does: after PR_SET_NO_NEW_PRIVS, and from Landlock ABI 7
// with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so that a host with audit
// enabled records the denials of the run's programs.
func RestrictSelf(fd int) error {
	abi, err := Probe()
	if err != nil {
		return err
	}
	return restrictSelf(fd, rightsFor(abi).restrict)
}

// mainThread reports whether the calling thread is the process's main
// thread, its thread-group leader.
func mainThread() bool { return unix.Gettid() == unix.Getpid() }
