package egress

import (
	"io"
	"os"
)

// counters holds a namespace's /proc/net/snmp and snmp6, opened by a
// task in it: a file of /proc/net reads the namespace it was opened in,
// whoever reads it later and from wherever (the host, once the run's
// tasks are gone).
type counters struct{ snmp, snmp6 *os.File }

// openCounters opens snmp and snmp6 in dir, the /proc/net of a task in
// the namespace (/proc/thread-self/net on a thread in it, or
// /proc/PID/net), or returns nil if snmp cannot be opened. snmp6 is nil
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

// read returns the datagrams the namespace refused and the errors it
// sent (parseCounters), refused read first and answered after: the
// kernel counts a datagram refused just before it sends the error, so
// that a datagram counted in the first read has its error counted by the
// second, and a burst under way does not read as unanswered.
func (c *counters) read() (refused, answered int, ok bool) {
	refused, _, ok1 := parseCounters(readFile(c.snmp), readFile(c.snmp6))
	_, answered, ok2 := parseCounters(readFile(c.snmp), readFile(c.snmp6))
	return refused, answered, ok1 && ok2
}

// readFile returns f's content from its start, by positioned reads, so
// that concurrent reads need no lock; nil for a nil f.
func readFile(f *os.File) []byte {
	if f == nil {
		return nil
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	return b
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
	if refused, answered, ok := n.counters.read(); ok {
		n.addUnanswered(refused, answered)
	}
}
