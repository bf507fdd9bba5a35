package egress

import (
	"fmt"

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
