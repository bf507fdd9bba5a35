package egress

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// A datagram around the proxy is recorded from the kernel's answer, an
// ICMP (ICMPv6) port unreachable, and the kernel may leave one
// unanswered: an older kernel rate-limits its errors on the loopback too
// (net.ipv4.icmp_msgs_per_sec), unless the namespace's masks exempt
// them, and a run as root can set the masks back (the namespace's
// /proc/sys/net is its root's to write, whatever capabilities it has
// left). The kernel's own counters of the namespace tell how many went
// unanswered, and no process can set them back: the datagrams it found
// no socket for (NoPorts, UDP and UDP-Lite, IPv4 and IPv6) less the
// destination unreachable errors it sent (OutDestUnreachs). Those are
// counted lost (Lost, OnLost), as the refusals a burst overran are.

// parseCounters returns, from a namespace's /proc/net/snmp and snmp6
// (nil where the kernel has no IPv6), the datagrams the kernel found no
// socket for and the destination unreachable errors it sent; ok is
// false if snmp lacks either.
func parseCounters(snmp, snmp6 []byte) (refused, answered int, ok bool) {
	// snmp: a line of names, then one of values, for each protocol.
	var found int
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		proto, fields, _ := strings.Cut(sc.Text(), ": ")
		f := strings.Fields(fields)
		if len(f) == 0 || f[0][0] < '0' || f[0][0] > '9' {
			names = f
			continue
		}
		for i, name := range names {
			if i >= len(f) {
				break
			}
			v, err := strconv.Atoi(f[i])
			switch {
			case err != nil:
			case name == "NoPorts" && (proto == "Udp" || proto == "UdpLite"):
				refused += v
				found |= 1
			case name == "OutDestUnreachs" && proto == "Icmp":
				answered += v
				found |= 2
			}
		}
	}
	// snmp6: a name and its value on each line.
	sc = bufio.NewScanner(bytes.NewReader(snmp6))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.Atoi(f[1])
		switch {
		case err != nil:
		case f[0] == "Udp6NoPorts", f[0] == "UdpLite6NoPorts":
			refused += v
		case f[0] == "Icmp6OutDestUnreachs":
			answered += v
		}
	}
	return refused, answered, found == 3
}

// addUnanswered counts lost, from the namespace's counters (refused,
// answered), the datagrams refused without an error that were not
// counted before. The gap only grows, but for an error counted after its
// datagram: a gap smaller than the one counted counts nothing.
func (n *Net) addUnanswered(refused, answered int) {
	n.directMu.Lock()
	defer n.directMu.Unlock()
	gap := refused - answered
	if gap <= n.unanswered {
		return
	}
	k := gap - n.unanswered
	n.unanswered = gap
	n.lost += k
	if f := n.proxy.cfg.OnLost; f != nil {
		f(k)
	}
}
