package egress

import (
	"errors"
	"net/netip"
)

// ErrNoSocket is returned by SocketHolders when no TCP socket with the
// addresses asked for is open in the namespace: the client closed it, or
// the addresses name no connection of that namespace.
var ErrNoSocket = errors.New("egress: no such TCP socket in the namespace")

// ErrHoldersHidden is returned by SocketHolders when the socket is open
// but no process of the namespace that this one may read holds it: its
// holders' descriptors are out of this process's sight (a process that
// is not dumpable, or of another user, read by a program without
// CAP_SYS_PTRACE), so who opened it cannot be told.
var ErrHoldersHidden = errors.New("egress: the socket is open, but every process holding it is hidden from this one (not dumpable, or another user's)")

// lookupTries is how many times SocketHolders reads the socket tables
// before it answers ErrNoSocket: the kernel serves /proc/net/tcp in
// several reads and may skip an entry when sockets open and close
// between them.
const lookupTries = 3

// A Holder is a process holding a descriptor of a socket.
type Holder struct {
	Pid     int
	Session int    // its session id
	Comm    string // its command name, as in /proc/PID/comm
}

// MethodForward is the Method of an Attempt to a forwarded loopback
// endpoint.
const MethodForward = "FORWARD"

// A Guard decides whether a connection from inside the namespace may
// reach endpoint, a loopback address of the host: endpoint is where it
// goes, at the address in the namespace the client connected to (the
// forwarder's listener, which is endpoint itself, or the proxy's), and
// peer the client's address; the client's socket is the one whose own
// address is peer and whose peer is at. It returns "" to let it through,
// else why not: the connection is then refused (closed at once, or
// answered 403 by the proxy) and recorded as a denied Attempt, Guarded,
// with that reason as its Err.
type Guard func(endpoint, at, peer netip.AddrPort) string

// SocketHolders returns the processes that hold the TCP socket whose own
// address is local and whose peer is remote, as the network namespace of
// the process nsPid sees it: the socket is found by its addresses in
// /proc/nsPid/net/tcp and tcp6 (an IPv4 address also matches its
// IPv4-mapped IPv6 form), then every process of that namespace with a
// descriptor of it, in /proc/PID/fd. A socket passed to another process
// (SCM_RIGHTS, pidfd_getfd) has each of them among its holders. It
// returns ErrNoSocket when no such socket is open (after lookupTries
// reads of the tables), ErrHoldersHidden when it is open but none of its
// holders can be read; only Linux has it.
func SocketHolders(nsPid int, local, remote netip.AddrPort) ([]Holder, error) {
	for i := 1; ; i++ {
		hs, err := socketHolders(nsPid, local, remote)
		if !errors.Is(err, ErrNoSocket) || i == lookupTries {
			return hs, err
		}
	}
}
