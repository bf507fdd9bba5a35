package egress

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// enterNamespace moves the calling thread into a new network namespace
// and brings its loopback up.
func enterNamespace() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return &NamespaceError{Op: "unshare(CLONE_NEWNET)", Err: err, Missing: missing(err)}
	}
	if err := loopbackUp(); err != nil {
		return &NamespaceError{Op: "bring lo up", Err: err, Missing: "the new namespace's loopback refused SIOCSIFFLAGS, which needs CAP_NET_ADMIN: run as root"}
	}
	return nil
}

// missing names what the host lacks when unshare fails with err.
func missing(err error) string {
	switch {
	case errors.Is(err, unix.EPERM):
		if os.Geteuid() != 0 {
			return "a network namespace needs CAP_SYS_ADMIN: run the program as root, or give its binary the capability (setcap cap_sys_admin+ep); without it, start the run with Wrap where unprivileged user namespaces are allowed"
		}
		return "a network namespace needs CAP_SYS_ADMIN and a seccomp profile that allows unshare: in a container, add CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN) or run it privileged"
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return "this kernel has no network namespaces: build it with CONFIG_NET_NS"
	case errors.Is(err, unix.ENOSPC):
		return "the limit on network namespaces is reached: raise /proc/sys/user/max_net_namespaces"
	case errors.Is(err, unix.ENOMEM):
		return "the kernel is out of memory for a new namespace"
	}
	return "the kernel refused a new network namespace"
}

// loopbackUp sets IFF_UP on lo, in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// ipv6Loopback reports whether the kernel has IPv6, so that ::1 exists.
func ipv6Loopback() bool {
	_, err := os.Stat("/proc/net/if_inet6")
	return err == nil
}

// openNamespace returns a file of the calling thread's network namespace.
func openNamespace() (*os.File, error) {
	f, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, &NamespaceError{Op: "open the new namespace", Err: err, Missing: "a /proc that shows this thread (/proc/thread-self, Linux 3.17 or later)"}
	}
	return f, nil
}

// joinNamespace moves the calling thread into the network namespace ns.
func joinNamespace(ns *os.File) error {
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return &NamespaceError{Op: "setns(CLONE_NEWNET)", Err: err, Missing: "joining a network namespace needs CAP_SYS_ADMIN and a seccomp profile that allows setns, as making one does"}
	}
	return nil
}

// NetCaps are the capabilities a run gives up in its network namespace,
// where a run as root would otherwise keep them: CAP_NET_ADMIN would let
// it delete the rules and the route that refuse and record its
// connections around the proxy (they would then be refused unrecorded),
// CAP_NET_RAW forge the resets the host records as refusals.
var NetCaps = []int{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}

// dropNetCaps takes NetCaps from the calling thread, the locked one that
// forks the run, and so from everything the run starts
// (sandbox.DropCaps). CAP_SYS_ADMIN stays for now: the ceiling's private
// roots, made next on this thread, need it, and the ceiling drops it
// (sandbox.EscapeCaps).
func dropNetCaps() error {
	if err := sandbox.DropCaps(NetCaps...); err != nil {
		return &NamespaceError{Op: "drop CAP_NET_ADMIN and CAP_NET_RAW", Err: err, Missing: "the run's network capabilities could not be dropped"}
	}
	return nil
}

// Probe reports whether this process can give a run a network namespace
// through Enter:
// nil if so, else a *NamespaceError (matching ErrUnavailable) naming what
// is missing. It makes one as a run does (Prepare), on a thread of its
// own that ends with the try, and has another such thread join it, so it
// answers for seccomp filters and container limits too; it costs about
// what a run's namespace costs.
func Probe() error {
	n, err := New(nil)
	if err != nil {
		return err
	}
	defer n.Close()
	return sandbox.Retired(n.Enter)
}
