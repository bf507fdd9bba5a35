//go:build !linux

package egress

import (
	"errors"
	"fmt"
	"net"
)

// mountSetattr reports that mount_setattr(2) is Linux's: no test on
// another system asks for it.
func mountSetattr(path string) int {
	fmt.Println("mount_setattr: not on this system")
	return 2
}

// setBroadcast reports that the broadcast helpers are Linux's.
func setBroadcast(c *net.UDPConn) error {
	return errors.New("SO_BROADCAST: not on this system")
}
