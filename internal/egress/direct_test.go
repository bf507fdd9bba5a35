package egress

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// TestSandboxNetRefusal: refusal reads the kernel's answer to a SYN where
// nothing listens (a reset with ACK and sequence number 0, from the
// address and port the SYN was sent to), over IPv4 with or without
// options and over IPv6, and takes no other packet for one: a reset that
// aborts a connection (its sequence number not 0), a reset without ACK,
// a truncated packet.
func TestSandboxNetRefusal(t *testing.T) {
	packet := func(src string, sport uint16, flags byte, seq uint32, options int) []byte {
		a := netip.MustParseAddr(src)
		var b []byte
		if a.Is4() {
			b = make([]byte, 20+options)
			b[0] = 0x40 | byte(5+options/4)
			b[9] = 6
			s := a.As4()
			copy(b[12:16], s[:])
		} else {
			b = make([]byte, 40)
			b[0] = 0x60
			b[6] = 6
			s := a.As16()
			copy(b[8:24], s[:])
		}
		tcp := make([]byte, 20)
		binary.BigEndian.PutUint16(tcp[0:], sport)
		binary.BigEndian.PutUint32(tcp[4:], seq)
		tcp[13] = flags
		return append(b, tcp...)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string // "host:port", or "" for no refusal
	}{
		{"IPv4", packet("192.0.2.1", 80, tcpRST|tcpACK, 0, 0), "192.0.2.1:80"},
		{"IPv4 with options", packet("127.0.0.1", 8080, tcpRST|tcpACK, 0, 8), "127.0.0.1:8080"},
		{"IPv6", packet("2001:db8::1", 443, tcpRST|tcpACK, 0, 0), "[2001:db8::1]:443"},
		{"an aborted connection", packet("127.0.0.1", 8080, tcpRST|tcpACK, 12345, 0), ""},
		{"a reset without ACK", packet("192.0.2.1", 80, tcpRST, 0, 0), ""},
		{"not a reset", packet("192.0.2.1", 80, tcpACK, 0, 0), ""},
		{"truncated", packet("192.0.2.1", 80, tcpRST|tcpACK, 0, 0)[:30], ""},
		{"empty", nil, ""},
	} {
		at, ok := refusal(c.b)
		got := ""
		if ok {
			got = netip.AddrPortFrom(netip.MustParseAddr(at.Host), uint16(at.Port)).String()
			if at.Method != MethodDirect || at.Allowed || at.Err == "" {
				t.Errorf("%s: %+v, want a denied %s attempt with its reason", c.name, at, MethodDirect)
			}
		}
		if got != c.want {
			t.Errorf("%s: refusal() = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSandboxNetRefusalUDP: refusal reads the kernel's ICMP (ICMPv6) port
// unreachable in answer to a UDP datagram, over IPv4 with or without
// options and over IPv6, as a refused MethodDirectUDP attempt naming the
// datagram's destination address and port (from the headers the error
// carries, not the error's own source), a UDP-Lite datagram's as well,
// and takes no other error for one: another ICMP type or code, ICMP in
// IPv6 or ICMPv6 in IPv4, headers inside of another IP version than the
// error's, an error about a TCP segment, a truncated one.
func TestSandboxNetRefusalUDP(t *testing.T) {
	// header returns an IP header from src to dst carrying proto, with
	// options bytes of IPv4 options.
	header := func(src, dst string, proto byte, options int) []byte {
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		if s.Is4() {
			b := make([]byte, 20+options)
			b[0] = 0x40 | byte(5+options/4)
			b[9] = proto
			copy(b[12:16], s.AsSlice())
			copy(b[16:20], d.AsSlice())
			return b
		}
		b := make([]byte, 40)
		b[0] = 0x60
		b[6] = proto
		copy(b[8:24], s.AsSlice())
		copy(b[24:40], d.AsSlice())
		return b
	}
	// unreachable returns the error, from the namespace's address from,
	// about a datagram of protocol inner sent to dst:dport.
	unreachable := func(proto, typ, code byte, from, dst string, inner byte, dport uint16, options int) []byte {
		b := header(from, from, proto, options)
		b = append(b, typ, code, 0, 0, 0, 0, 0, 0)
		b = append(b, header(from, dst, inner, options)...)
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, 40000), dport)
	}
	// mixed returns outer, then icmp, then inner and a UDP header to
	// port 53: an error whose inner headers need not match its own.
	mixed := func(outer, icmp, inner []byte) []byte {
		b := append(append(outer, icmp...), inner...)
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, 40000), 53)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string // "host:port", or "" for no refusal
	}{
		{"IPv4", unreachable(protoICMP, 3, 3, "192.0.2.1", "192.0.2.1", protoUDP, 53, 0), "192.0.2.1:53"},
		{"IPv4 with options", unreachable(protoICMP, 3, 3, "127.0.0.1", "10.0.0.53", protoUDP, 5353, 8), "10.0.0.53:5353"},
		{"IPv6", unreachable(protoICMPv6, 1, 4, "::1", "2001:db8::1", protoUDP, 443, 0), "[2001:db8::1]:443"},
		{"host unreachable", unreachable(protoICMP, 3, 1, "192.0.2.1", "192.0.2.1", protoUDP, 53, 0), ""},
		{"an echo reply", unreachable(protoICMP, 0, 0, "192.0.2.1", "192.0.2.1", protoUDP, 53, 0), ""},
		{"ICMPv6 type and code in ICMP", unreachable(protoICMP, 1, 4, "192.0.2.1", "192.0.2.1", protoUDP, 53, 0), ""},
		{"ICMP in IPv6", unreachable(protoICMP, 3, 3, "::1", "2001:db8::1", protoUDP, 53, 0), ""},
		{"about TCP", unreachable(protoICMP, 3, 3, "192.0.2.1", "192.0.2.1", protoTCP, 53, 0), ""},
		{"truncated", unreachable(protoICMP, 3, 3, "192.0.2.1", "192.0.2.1", protoUDP, 53, 0)[:50], ""},
		{"UDP-Lite", unreachable(protoICMP, 3, 3, "127.0.0.1", "127.0.0.1", protoUDPLite, 9, 0), "127.0.0.1:9"},
		{"UDP-Lite over IPv6", unreachable(protoICMPv6, 1, 4, "::1", "::1", protoUDPLite, 9, 0), "[::1]:9"},
		{"IPv6 headers in ICMP", mixed(header("192.0.2.1", "192.0.2.1", protoICMP, 0), []byte{3, 3, 0, 0, 0, 0, 0, 0}, header("::1", "2001:db8::1", protoUDP, 0)), ""},
		{"IPv4 headers in ICMPv6", mixed(header("::1", "::1", protoICMPv6, 0), []byte{1, 4, 0, 0, 0, 0, 0, 0}, header("192.0.2.1", "192.0.2.1", protoUDP, 0)), ""},
	} {
		at, ok := refusal(c.b)
		got := ""
		if ok {
			got = netip.AddrPortFrom(netip.MustParseAddr(at.Host), uint16(at.Port)).String()
			if at.Method != MethodDirectUDP || at.Allowed || !strings.Contains(at.Err, "UDP") {
				t.Errorf("%s: %+v, want a denied %s attempt naming UDP", c.name, at, MethodDirectUDP)
			}
		}
		if got != c.want {
			t.Errorf("%s: refusal() = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSandboxNetRefusalBroadcast: refusal reads a UDP or UDP-Lite
// datagram to a broadcast or multicast address (IPv4's limited
// broadcast, the loopback's broadcast, 224.0.0.0/4, IPv6's ff00::/8),
// which the kernel answers with no error, from the datagram itself: a
// refused MethodDirectUDP attempt naming its destination address and
// port. A datagram to a unicast address is no refusal (it may reach a
// process of the run; the kernel's error says when it did not), nor is a
// truncated one, nor a TCP segment to such an address.
func TestSandboxNetRefusalBroadcast(t *testing.T) {
	datagram := func(dst string, proto byte, dport uint16) []byte {
		d := netip.MustParseAddr(dst)
		var b []byte
		if d.Is4() {
			b = make([]byte, 20)
			b[0] = 0x45
			b[9] = proto
			copy(b[12:16], d.AsSlice()) // the kernel's source: the address itself
			copy(b[16:20], d.AsSlice())
		} else {
			b = make([]byte, 40)
			b[0] = 0x60
			b[6] = proto
			b[23] = 1 // ::1
			copy(b[24:40], d.AsSlice())
		}
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, 40000), dport)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string // "host:port", or "" for no refusal
	}{
		{"limited broadcast", datagram("255.255.255.255", protoUDP, 67), "255.255.255.255:67"},
		{"the loopback's broadcast", datagram("127.255.255.255", protoUDP, 9), "127.255.255.255:9"},
		{"mDNS", datagram("224.0.0.251", protoUDP, 5353), "224.0.0.251:5353"},
		{"SSDP", datagram("239.255.255.250", protoUDP, 1900), "239.255.255.250:1900"},
		{"UDP-Lite multicast", datagram("239.1.2.3", protoUDPLite, 9), "239.1.2.3:9"},
		{"IPv6 all nodes", datagram("ff02::1", protoUDP, 9), "[ff02::1]:9"},
		{"IPv6 DHCP servers", datagram("ff05::1:3", protoUDP, 547), "[ff05::1:3]:547"},
		{"UDP-Lite IPv6 multicast", datagram("ff02::fb", protoUDPLite, 5353), "[ff02::fb]:5353"},
		{"unicast", datagram("192.0.2.1", protoUDP, 53), ""},
		{"unicast IPv6", datagram("2001:db8::1", protoUDP, 443), ""},
		{"the loopback", datagram("127.0.0.1", protoUDP, 9), ""},
		{"truncated", datagram("224.0.0.251", protoUDP, 5353)[:22], ""},
		{"TCP", datagram("224.0.0.251", protoTCP, 5353), ""},
	} {
		at, ok := refusal(c.b)
		got := ""
		if ok {
			got = netip.AddrPortFrom(netip.MustParseAddr(at.Host), uint16(at.Port)).String()
			if at.Method != MethodDirectUDP || at.Allowed || !strings.Contains(at.Err, "UDP") || !strings.Contains(at.Err, "cast") {
				t.Errorf("%s: %+v, want a denied %s attempt naming UDP and the kind of address", c.name, at, MethodDirectUDP)
			}
		}
		if got != c.want {
			t.Errorf("%s: refusal() = %q, want %q", c.name, got, c.want)
		}
	}
}
