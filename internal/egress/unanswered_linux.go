package egress

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// counters holds a namespace's /proc/net/snmp and snmp6, opened by a
// task in it: a file of /proc/net reads the namespace it was opened in,
// whoever reads it later and from wherever (the host, once the run's
// tasks are gone).
type counters struct{ snmp, snmp6 *os.File }

// openCounters opens snmp and snmp6 in dir, the /proc/net of a task in
// the namespace (/proc/thread-self/net on a thread in it: the pool's, by
// root's route, or the first stage's, which sends them to the host, by
// the user's), or returns nil if snmp cannot be opened. snmp6 is nil
// where the kernel has no IPv6.
func openCounters(dir string) *counters {
	snmp, err := os.Open(dir + "/snmp")
	if err != nil {
		return nil
	}
	c := &counters{snmp: snmp}
	if f, err := os.Open(dir + "/snmp6"); err == nil {
		c.snmp6 = f
	}
	return c
}

// fds returns the descriptors of c's files (none for a nil c), for the
// first stage to send: c stays referenced until they are sent.
func (c *counters) fds() []int {
	if c == nil {
		return nil
	}
	fds := []int{int(c.snmp.Fd())}
	if c.snmp6 != nil {
		fds = append(fds, int(c.snmp6.Fd()))
	}
	return fds
}

// countersOf returns the counters whose files the first stage sent, by
// their descriptors (snmp, then snmp6 where there is IPv6), or nil for
// none. Each must be a file of procfs: where one is not, every one is
// closed and the run's refused datagrams go uncounted rather than be read
// from another file.
func countersOf(fds []int) *counters {
	if len(fds) == 0 {
		return nil
	}
	for _, fd := range fds {
		var fs unix.Statfs_t
		if unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.PROC_SUPER_MAGIC {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil
		}
	}
	c := &counters{snmp: os.NewFile(uintptr(fds[0]), "snmp")}
	if len(fds) > 1 {
		c.snmp6 = os.NewFile(uintptr(fds[1]), "snmp6")
	}
	return c
}

// read returns the datagrams the namespace refused and the errors it
// sent (parseCounters). snmp shows ICMP's line before UDP's, and the
// kernel counts a datagram refused just before it sends the error: a
// datagram refused while snmp was read may show without its error. So
// where the first read shows more unanswered than last, the count so
// far, the errors are read again, after the refusals: a burst under way
// does not read as unanswered.
func (c *counters) read(last int) (refused, answered int, ok bool) {
	b4, b6 := counterBufs.Get().(*[]byte), counterBufs.Get().(*[]byte)
	defer counterBufs.Put(b4)
	defer counterBufs.Put(b6)
	refused, answered, ok = parseCounters(readFile(c.snmp, b4), readFile(c.snmp6, b6))
	if !ok || refused-answered <= last {
		return refused, answered, ok
	}
	_, answered, ok = parseCounters(readFile(c.snmp, b4), readFile(c.snmp6, b6))
	return refused, answered, ok
}

// counterBufs holds the buffers the counters' files are read into, at
// every Flush: a buffer made for each read would cost more than the read.
var counterBufs = sync.Pool{New: func() any {
	b := make([]byte, 16<<10)
	return &b
}}

// maxCounters bounds what readFile reads of a counters' file.
const maxCounters = 1 << 20

// readFile returns f's content, by one positioned read from its start
// into *buf (no lock between concurrent reads; a /proc/net file read at
// another offset is made again whole), or nil for a nil or closed f. The
// counters' files are a few KiB; a file that fills *buf is read again
// into a buffer twice as large, which then replaces it.
func readFile(f *os.File, buf *[]byte) []byte {
	if f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	for {
		b, n := *buf, 0
		// Read holds the descriptor open for the call: a Close meanwhile
		// waits, and never leaves the number to another file.
		if rc.Read(func(fd uintptr) bool {
			n, err = unix.Pread(int(fd), b, 0)
			return true
		}) != nil || err != nil {
			return nil
		}
		if n < len(b) || len(b) >= maxCounters {
			return b[:n]
		}
		*buf = make([]byte, 2*len(b))
	}
}

// close closes the files; c may be nil.
func (c *counters) close() {
	if c == nil {
		return
	}
	c.snmp.Close()
	if c.snmp6 != nil {
		c.snmp6.Close()
	}
}

// countUnanswered counts lost the datagrams the namespace refused
// without an error since the last call (addUnanswered), where its
// counters could be opened.
func (n *Net) countUnanswered() {
	if n.counters == nil {
		return
	}
	n.directMu.Lock()
	last := n.unanswered
	n.directMu.Unlock()
	if refused, answered, ok := n.counters.read(last); ok {
		n.addUnanswered(refused, answered)
	}
}
