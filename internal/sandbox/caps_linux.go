package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// EscapeCaps are the capabilities a run as root gives up under the
// sandbox, because each reaches past what Landlock and the namespaces
// hold: loading kernel code (CAP_SYS_MODULE; CAP_BPF, CAP_PERFMON and
// CAP_SYS_ADMIN for eBPF, whose helpers read and write other processes'
// memory), raw devices and ports (CAP_SYS_RAWIO), joining other
// namespaces and much else (CAP_SYS_ADMIN), the host's network
// configuration (CAP_NET_ADMIN), tracing beyond the run (CAP_SYS_PTRACE),
// the security modules' policy (CAP_MAC_ADMIN, CAP_MAC_OVERRIDE), the
// audit rules (CAP_AUDIT_CONTROL), the kernel log (CAP_SYSLOG), the
// clock (CAP_SYS_TIME) and a reboot (CAP_SYS_BOOT). The rest of root's
// (reading and writing files the ceiling allows whoever owns them,
// changing owners, binding low ports) stays.
var EscapeCaps = []int{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_BPF, unix.CAP_PERFMON,
	unix.CAP_SYS_RAWIO, unix.CAP_NET_ADMIN, unix.CAP_SYS_PTRACE,
	unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_AUDIT_CONTROL,
	unix.CAP_SYSLOG, unix.CAP_SYS_TIME, unix.CAP_SYS_BOOT,
}

// DropCaps takes caps from the calling thread, the locked one that forks
// the run, and so from everything the run starts: from its bounding set,
// so that no execve gives them back (root's execve grants what the
// bounding set holds), and from its inheritable, permitted and effective
// sets (the ambient set follows). Where the bounding set cannot be
// lowered (no CAP_SETPCAP), it sets no_new_privs instead, under which an
// execve gains no capability the thread lacks. A capability this kernel
// does not know is skipped. A thread without them changes nothing.
func DropCaps(caps ...int) error {
	bounded := true
	for _, c := range caps {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			bounded = false
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capget: %w", err)
	}
	for _, c := range caps {
		bit := uint32(1) << (c % 32)
		d := &data[c/32]
		d.Effective &^= bit
		d.Permitted &^= bit
		d.Inheritable &^= bit
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: drop capabilities: %w", err)
	}
	if !bounded {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("sandbox: no_new_privs: %w", err)
		}
	}
	return nil
}
