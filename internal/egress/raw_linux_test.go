package egress

import "golang.org/x/sys/unix"

// rawSocket opens and closes a packet socket, and says how that went.
func rawSocket() string {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	unix.Close(fd)
	return "opened"
}
