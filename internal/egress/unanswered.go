package egress

import (
	"bytes"
	"strconv"
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
	// snmp: a line of names, then one of values, for each protocol. It is
	// read at every Flush: nothing here allocates.
	var found int
	var names []byte
	for rest := snmp; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		proto, fields, _ := bytes.Cut(line, []byte(": "))
		if p := string(proto); p != "Udp" && p != "UdpLite" && p != "Icmp" {
			continue // names and values alike
		}
		first, _ := nextField(fields)
		if len(first) == 0 || first[0] < '0' || first[0] > '9' {
			names = fields
			continue
		}
		for ns, vs := names, fields; ; {
			var name, val []byte
			name, ns = nextField(ns)
			val, vs = nextField(vs)
			if len(name) == 0 || len(val) == 0 {
				break
			}
			switch {
			case string(name) == "NoPorts" && (string(proto) == "Udp" || string(proto) == "UdpLite"):
				if v, err := strconv.Atoi(string(val)); err == nil {
					refused += v
					found |= 1
				}
			case string(name) == "OutDestUnreachs" && string(proto) == "Icmp":
				if v, err := strconv.Atoi(string(val)); err == nil {
					answered += v
					found |= 2
				}
			}
		}
	}
	// snmp6: a name and its value on each line.
	for rest := snmp6; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if !bytes.HasPrefix(line, []byte("Udp")) && !bytes.HasPrefix(line, []byte("Icmp6OutDest")) {
			continue
		}
		name, tail := nextField(line)
		val, tail := nextField(tail)
		if extra, _ := nextField(tail); len(val) == 0 || len(extra) != 0 {
			continue
		}
		switch string(name) {
		case "Udp6NoPorts", "UdpLite6NoPorts":
			if v, err := strconv.Atoi(string(val)); err == nil {
				refused += v
			}
		case "Icmp6OutDestUnreachs":
			if v, err := strconv.Atoi(string(val)); err == nil {
				answered += v
			}
		}
	}
	return refused, answered, found == 3
}

// nextField returns the first field of b, separated by spaces or tabs,
// and what follows it; an empty field where b holds none.
func nextField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " \t")
	i := bytes.IndexAny(b, " \t")
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i:]
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
