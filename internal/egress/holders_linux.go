package egress

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/clinvoke/clinvoke/internal/procstat"
)

func socketHolders(nsPid int, local, remote netip.AddrPort) ([]Holder, error) {
	ns := "/proc/" + strconv.Itoa(nsPid)
	var inode string
	for _, f := range []string{"/net/tcp", "/net/tcp6"} {
		b, err := readTable(ns + f)
		if err != nil {
			if f == "/net/tcp6" && os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return nil, err
		}
		if inode = findSocket(b, local, remote); inode != "" {
			break
		}
	}
	if inode == "" {
		return nil, ErrNoSocket
	}
	var st syscall.Stat_t
	if err := syscall.Stat(ns+"/ns/net", &st); err != nil {
		return nil, err
	}
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	want := "socket:[" + inode + "]"
	var out []Holder
	hidden := false // a process of the namespace whose descriptors cannot be read
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		dir := "/proc/" + name
		var pst syscall.Stat_t
		if syscall.Stat(dir+"/ns/net", &pst) != nil || pst.Ino != st.Ino || pst.Dev != st.Dev {
			continue // gone, or in another namespace
		}
		has, err := holds(dir+"/fd", want)
		if has {
			out = append(out, holder(pid))
		}
		hidden = hidden || errors.Is(err, fs.ErrPermission)
	}
	switch {
	case len(out) != 0:
		return out, nil
	case hidden && socketOpen(ns, local, remote):
		return nil, ErrHoldersHidden
	}
	return nil, ErrNoSocket // closed between the two reads
}

// readTable reads a socket table; a variable for tests.
var readTable = os.ReadFile

// socketOpen reports whether the socket from local to remote is still
// in the tables of the namespace of the process whose /proc is ns.
func socketOpen(ns string, local, remote netip.AddrPort) bool {
	for _, f := range []string{"/net/tcp", "/net/tcp6"} {
		if b, err := readTable(ns + f); err == nil && findSocket(b, local, remote) != "" {
			return true
		}
	}
	return false
}

// holds reports whether the descriptor directory fds has a link to want,
// and the error that kept it from reading fds.
func holds(fds, want string) (bool, error) {
	d, err := os.Open(fds)
	if err != nil {
		return false, err
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, fd := range names {
		if l, err := os.Readlink(fds + "/" + fd); err == nil && l == want {
			return true, nil
		}
	}
	return false, nil
}

// holder reads the session and command name of pid; -1 and "" where they
// cannot be read (it exited), which no caller takes for the CLI's.
func holder(pid int) Holder {
	h := Holder{Pid: pid, Session: -1}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return h
	}
	comm, ok := procstat.Comm(b)
	if !ok {
		return h
	}
	h.Comm = string(comm)
	if st, err := procstat.Parse(b); err == nil {
		h.Session = st.Session
	}
	return h
}

// findSocket returns the inode of the socket of a /proc/net/tcp{,6} table
// whose local address is local and remote address remote, or "".
func findSocket(table []byte, local, remote netip.AddrPort) string {
	lines := bytes.Split(table, []byte("\n"))
	for _, ln := range lines[min(1, len(lines)):] {
		f := strings.Fields(string(ln))
		if len(f) < 10 {
			continue
		}
		l, err1 := parseProcAddr(f[1])
		r, err2 := parseProcAddr(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		if sameAddr(l, local) && sameAddr(r, remote) && f[9] != "0" {
			return f[9]
		}
	}
	return ""
}

// sameAddr compares two addresses with IPv4-mapped IPv6 ones unmapped.
func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseProcAddr reads an address of /proc/net/tcp{,6}: the address in
// hex, each 32-bit word in the host's byte order, ':' and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}
