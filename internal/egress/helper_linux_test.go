package egress

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// mountSetattr asks that the mount at path be made writable by
// mount_setattr(2), which Landlock does not refuse, and prints what the
// kernel said.
func mountSetattr(path string) int {
	err := unix.MountSetattr(unix.AT_FDCWD, path, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
	fmt.Println("mount_setattr:", err)
	return 0
}

// setBroadcast sets SO_BROADCAST on c, without which a datagram to a
// broadcast address is refused by the sender's own kernel (EACCES).
func setBroadcast(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1) }); err != nil {
		return err
	}
	return serr
}
