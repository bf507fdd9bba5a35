//go:build !linux

package egress

import (
	"net/netip"
	"syscall"
)

// bindPort records nothing outside Linux, where no run has a network
// namespace.
func bindPort(string, syscall.RawConn) (netip.AddrPort, bool, error) {
	return netip.AddrPort{}, false, nil
}
