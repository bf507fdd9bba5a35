//go:build !linux

package egress

import (
	"errors"
	"net/netip"
)

// socketHolders reports that only Linux shows its sockets' holders.
func socketHolders(int, netip.AddrPort, netip.AddrPort) ([]Holder, error) {
	return nil, errors.ErrUnsupported
}
