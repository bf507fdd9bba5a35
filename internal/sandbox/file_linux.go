package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File returns a duplicate of the ruleset's descriptor (close-on-exec),
// for a process that applies the ruleset itself (landlock_restrict_self,
// after PR_SET_NO_NEW_PRIVS) just before it executes the run's program.
// The caller closes it.
func (r *Ruleset) File() (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: duplicate the ruleset: %w", err)
	}
	return os.NewFile(uintptr(fd), "landlock-ruleset"), nil
}
