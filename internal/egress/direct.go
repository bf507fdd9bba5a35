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

// TCP flags.
const (
	tcpRST = 0x04
	tcpACK = 0x10
)

// errNotCaught is BypassRecorded's answer before the namespace exists.
var errNotCaught = errors.New("the namespace is not set up yet")

// refusal reads a packet the filter kept, from the network header on: a
// TCP reset the namespace sent in answer to a SYN to an address and port
// where nothing listens (sequence number 0, ACK set: RFC 9293's answer to
// a segment without ACK), sent from that address and port. Other resets
// (a connection aborted) are not refusals.
func refusal(b []byte) (Attempt, bool) {
	var (
		src netip.Addr
		tcp []byte
	)
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < ihl+20 {
			return Attempt{}, false
		}
		src, tcp = netip.AddrFrom4([4]byte(b[12:16])), b[ihl:]
	case len(b) >= 60 && b[0]>>4 == 6:
		src, tcp = netip.AddrFrom16([16]byte(b[8:24])).Unmap(), b[40:]
	default:
		return Attempt{}, false
	}
	if tcp[13]&(tcpRST|tcpACK) != tcpRST|tcpACK || binary.BigEndian.Uint32(tcp[4:8]) != 0 {
		return Attempt{}, false
	}
	return Attempt{
		Time:   time.Now(),
		Method: MethodDirect,
		Host:   src.String(),
		Port:   int(binary.BigEndian.Uint16(tcp[0:2])),
		Err:    "refused: the connection bypassed the proxy, the network namespace's only way out",
	}, true
}

// Flush records the connections that bypassed the proxy which the
// namespace has refused and which are not recorded yet, so that
// Attempts, and the OnAttempt calls made before Flush returns, include
// every one refused before the call. Attempts flushes first too.
func (n *Net) Flush() {
	if n.direct != nil {
		n.direct.Control(n.drain)
	}
}

// BypassRecorded reports, once Enter or Started returned nil, whether the
// connections that bypass the proxy are recorded (Attempts with Method
// MethodDirect): nil if so, else why this kernel cannot, in which case
// they are refused ("network is unreachable", or "connection refused" on
// the loopback) unrecorded.
func (n *Net) BypassRecorded() error { return n.bypassErr }
