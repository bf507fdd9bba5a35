package egress

import (
	"encoding/binary"
	"net/netip"
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
