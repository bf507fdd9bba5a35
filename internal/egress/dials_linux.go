package egress

import (
	"net/netip"
	"syscall"
)

// bindPort binds the socket of rc, of network "tcp4" or "tcp6", to a
// free port on every address of its family, and returns its key in
// Dials.
func bindPort(network string, rc syscall.RawConn) (k netip.AddrPort, ok bool, err error) {
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{}
	a := netip.IPv4Unspecified()
	if network == "tcp6" {
		sa, a = &syscall.SockaddrInet6{}, netip.IPv6Unspecified()
	}
	var port int
	cerr := rc.Control(func(fd uintptr) {
		if err = syscall.Bind(int(fd), sa); err != nil {
			return
		}
		var got syscall.Sockaddr
		if got, err = syscall.Getsockname(int(fd)); err != nil {
			return
		}
		switch s := got.(type) {
		case *syscall.SockaddrInet4:
			port = s.Port
		case *syscall.SockaddrInet6:
			port = s.Port
		}
	})
	if cerr != nil {
		return k, false, cerr
	}
	if err != nil || port == 0 {
		return k, false, err
	}
	return netip.AddrPortFrom(a, uint16(port)), true, nil
}
