package egress

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"
)

// MethodDirect is the Method of an Attempt that bypassed the proxy: a TCP
// connection the run's process opened straight to an address, which the
// namespace refused at once (the process sees "connection refused").
const MethodDirect = "DIRECT"

// MethodDirectUDP is the Method of an Attempt that sent a UDP datagram
// around the proxy (DNS to a resolver, QUIC), or a UDP-Lite one (its Err
// names which): the namespace refused it at once (a connected socket
// sees "connection refused"). A datagram to a broadcast or multicast
// address (DHCP, mDNS, SSDP) is one too, its Err saying which kind of
// address: the sender is told nothing, as on any host.
const MethodDirectUDP = "DIRECT-UDP"

// TCP flags.
const (
	tcpRST = 0x04
	tcpACK = 0x10
)

// The IP protocols refusal reads.
const (
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoICMPv6  = 58
	protoUDPLite = 136
)

// ICMP's port unreachable, as the 16 bits of type and code: the value
// a policy rule's destination port range matches for ICMP (the kernel's
// flow keeps type and code where a port would be), and the filter's.
const (
	icmpPortUnreachable   = 3<<8 | 3 // ICMP destination unreachable, port unreachable
	icmpv6PortUnreachable = 1<<8 | 4 // ICMPv6 destination unreachable, port unreachable
)

// errNotCaught is BypassRecorded's answer before the namespace exists.
var errNotCaught = errors.New("the namespace is not set up yet")

// refusal reads a packet the filter kept, from the network header on:
// either a TCP reset the namespace sent in answer to a SYN to an address
// and port where nothing listens (sequence number 0, ACK set: RFC 9293's
// answer to a segment without ACK), sent from that address and port, or
// an ICMP (ICMPv6 over IPv6) port unreachable error the namespace sent in
// answer to a UDP or UDP-Lite datagram, which carries the datagram's
// headers (of the error's own IP version), or a UDP or UDP-Lite
// datagram to a broadcast or multicast address, which no error answers
// (cast). Other resets (a connection aborted), other errors and datagrams
// to a unicast address are not refusals.
func refusal(b []byte) (Attempt, bool) {
	src, dst, proto, payload, ok := ipHeader(b)
	switch {
	case !ok:
	case proto == protoTCP:
		if len(payload) < 20 || payload[13]&(tcpRST|tcpACK) != tcpRST|tcpACK || binary.BigEndian.Uint32(payload[4:8]) != 0 {
			break
		}
		return refused(MethodDirect, src, payload[0:2], "the connection bypassed the proxy, the network namespace's only way out"), true
	case proto == protoICMP && b[0]>>4 == 4, proto == protoICMPv6 && b[0]>>4 == 6:
		want := uint16(icmpPortUnreachable)
		if proto == protoICMPv6 {
			want = icmpv6PortUnreachable
		}
		if len(payload) < 8 || binary.BigEndian.Uint16(payload[0:2]) != want {
			break
		}
		// The datagram's own headers follow ICMP's, of the same IP
		// version.
		inner := payload[8:]
		_, dst, proto, udp, ok := ipHeader(inner)
		if !ok || inner[0]>>4 != b[0]>>4 || proto != protoUDP && proto != protoUDPLite || len(udp) < 4 {
			break
		}
		return refused(MethodDirectUDP, dst, udp[2:4], "a "+udpName[proto]+" datagram bypassed the proxy, the network namespace's only way out, which carries TCP alone"), true
	case proto == protoUDP, proto == protoUDPLite:
		// A datagram to a broadcast or multicast address, which the
		// kernel answers with no error: the datagram itself.
		kind := cast(dst)
		if kind == "" || len(payload) < 4 {
			break
		}
		return refused(MethodDirectUDP, dst, payload[2:4], "a "+udpName[proto]+" datagram to a "+kind+" address, which never leaves the network namespace: only TCP connections through the proxy do"), true
	}
	return Attempt{}, false
}

// udpName names the datagram protocols refusal reads.
var udpName = map[byte]string{protoUDP: "UDP", protoUDPLite: "UDP-Lite"}

// cast returns "broadcast" or "multicast" for such a destination of the
// namespace (IPv4's limited broadcast, the loopback's broadcast, the only
// subnet of the namespace; 224.0.0.0/4; IPv6's ff00::/8), else "": a
// unicast address, where a datagram either reaches a process of the run
// or is answered by the kernel's error.
func cast(dst netip.Addr) string {
	switch {
	case dst.IsMulticast():
		return "multicast"
	case dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}), dst == netip.AddrFrom4([4]byte{127, 255, 255, 255}):
		return "broadcast"
	}
	return ""
}

// Cast returns "broadcast" or "multicast" for a MethodDirectUDP attempt
// sent to such an address (a discovery protocol's: DHCP, mDNS, SSDP),
// which no error answers and which reaches no host beyond the run, else
// "".
func (a Attempt) Cast() string {
	addr, err := netip.ParseAddr(a.Host)
	if a.Method != MethodDirectUDP || err != nil {
		return ""
	}
	return cast(addr)
}

// refused returns a denied attempt of method to addr and the port in
// network byte order, refused because of why.
func refused(method string, addr netip.Addr, port []byte, why string) Attempt {
	return Attempt{Time: time.Now(), Method: method, Host: addr.String(), Port: int(binary.BigEndian.Uint16(port)), Err: "refused: " + why}
}

// ipHeader reads an IPv4 header, or an IPv6 header without extension
// headers: the addresses, the protocol and what follows the header.
func ipHeader(b []byte) (src, dst netip.Addr, proto byte, payload []byte, ok bool) {
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl {
			return
		}
		return netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20])), b[9], b[ihl:], true
	case len(b) >= 40 && b[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(b[8:24])).Unmap(), netip.AddrFrom16([16]byte(b[24:40])).Unmap(), b[6], b[40:], true
	}
	return
}

// Flush records the connections that bypassed the proxy which the
// namespace has refused and which are not recorded yet, so that
// Attempts, and the OnAttempt calls made before Flush returns, include
// every one refused before the call, and counts lost those refused
// without the answer they are recorded from (unanswered.go). Attempts
// flushes first too.
func (n *Net) Flush() {
	if n.direct != nil {
		n.direct.Control(n.drain)
		n.countUnanswered()
	}
}

// BypassRecorded reports, once Enter or Started returned nil, whether the
// connections and datagrams that bypass the proxy are recorded (Attempts
// with Method MethodDirect and MethodDirectUDP): nil if so, else why this
// kernel cannot, in which case they are refused ("network is
// unreachable", or "connection refused" on the loopback) unrecorded.
func (n *Net) BypassRecorded() error { return n.bypassErr }
