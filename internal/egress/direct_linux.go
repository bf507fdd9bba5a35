package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A connection that bypasses the proxy (a socket to 192.0.2.1:80, or to
// a server on the host's loopback that the run was not given) would be
// refused by the namespace's kernel before anything could see it: no
// route, or no listener. catchDirect makes every such attempt a refusal
// the host sees. A route of type local for every address (in the local
// table, as the kernel wants of an address a socket connects from) makes
// every address the namespace's own for TCP and UDP: the policy rules
// that read the local table are replaced by one for the loopback's
// addresses (every protocol), one for TCP, one for UDP and one for the
// kernel's own ICMP "port unreachable" errors (which answer a datagram
// from the address it was sent to), so that a ping to an outside address
// still finds no route ("network is unreachable"). A SYN to any address
// and port is then delivered on the loopback, where nothing listens but
// the proxy and the forwarders, and the kernel answers at once with a
// reset ("connection refused"); a UDP datagram is delivered there too,
// where nothing listens, and the kernel answers with ICMP (or ICMPv6)
// port unreachable, which carries the datagram's own header (a connected
// socket reads "connection refused"). A datagram to a broadcast or
// multicast address is delivered on the loopback too, and answered by no
// error. A packet socket bound to the loopback keeps those resets and
// errors, and those datagrams (a classic BPF filter drops everything else
// in the kernel), and the host reads them: each names the address and
// port a connection or a datagram was sent to.

// The priorities of catchDirect's rules: before the main table's (32766).
const (
	loopbackPriority = 1 // the loopback's addresses, every protocol
	tcpPriority      = 2 // TCP, every address
	icmpPriority     = 3 // ICMP port unreachable, every address
	udpPriority      = 4 // UDP, every address
)

// skfPktType is SKF_AD_OFF + SKF_AD_PKTTYPE: a classic BPF load of the
// packet's type (host, outgoing, …) instead of its bytes.
const skfPktType = 0xfffff000 + 4

// keepBytes is how much of a packet the filter keeps: an IPv4 header
// with options, ICMP's, the datagram's IPv4 header with options and the
// start of its UDP header.
const keepBytes = 192

// refusalFilter keeps the TCP resets and the ICMP and ICMPv6 port
// unreachable errors the namespace receives, and the UDP and UDP-Lite
// datagrams it receives to a broadcast or multicast address, which no
// error answers (IPv4's limited broadcast and the loopback's, 224.0.0.0/4;
// IPv6's ff00::/8) (IPv4, or IPv6 without extension headers), each copy
// once: the loopback shows a packet as sent and again as received. The
// offsets are the network header's: a SOCK_DGRAM packet socket sees no
// link-layer header.
var refusalFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: skfPktType},                           // 0: A = the packet's type
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.PACKET_OUTGOING, Jt: 31},        // 1: sent: drop
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 0},                                    // 2: A = version and length
	{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0xf0},                                // 3
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x60, Jt: 16},                        // 4: IPv6: to 21
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x40, Jf: 27},                        // 5: not IPv4: drop
	{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},                                   // 6: X = IPv4 header's length
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9},                                    // 7: A = protocol
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_TCP, Jf: 2},             // 8: not TCP: to 11
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 13},                                   // 9: A = TCP flags
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: tcpRST, Jt: 21, Jf: 22},             // 10: RST: keep
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_ICMP, Jf: 2},            // 11: not ICMP: to 14
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_IND, K: 0},                                    // 12: A = ICMP type and code
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: icmpPortUnreachable, Jt: 18, Jf: 19}, // 13: keep
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_UDP, Jt: 1},             // 14: UDP: to 16
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_UDPLITE, Jf: 17},        // 15: not UDP-Lite: drop
	{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 16},                                   // 16: A = destination
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0xffffffff, Jt: 14},                  // 17: limited broadcast: keep
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x7fffffff, Jt: 13},                  // 18: the loopback's broadcast: keep
	{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0xf0000000},                          // 19
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0xe0000000, Jt: 11, Jf: 12},          // 20: multicast: keep
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 6},                                    // 21: A = IPv6 next header
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_TCP, Jf: 2},             // 22: not TCP: to 25
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 40 + 13},                              // 23: A = TCP flags
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: tcpRST, Jt: 7, Jf: 8},               // 24: RST: keep
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_ICMPV6, Jf: 2},          // 25: not ICMPv6: to 28
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 40},                                   // 26: A = ICMPv6 type and code
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: icmpv6PortUnreachable, Jt: 4, Jf: 5}, // 27: keep
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_UDP, Jt: 1},             // 28: UDP: to 30
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_UDPLITE, Jf: 3},         // 29: not UDP-Lite: drop
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 24},                                   // 30: A = destination's first byte
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0xff, Jf: 1},                         // 31: multicast: keep
	{Code: unix.BPF_RET | unix.BPF_K, K: keepBytes},                                          // 32: keep the headers
	{Code: unix.BPF_RET | unix.BPF_K},                                                        // 33: drop
}

// catchDirect, on a thread in the run's new namespace with CAP_NET_ADMIN
// and CAP_NET_RAW there, sets up the catch-all route and opens the packet
// socket that sees its refusals. It returns the socket's descriptor
// (non-blocking, close-on-exec), or -1 and why this kernel cannot: the
// run's direct connections are then refused ("network is unreachable")
// unrecorded. IPv6 is caught where the namespace has it.
func catchDirect() (fd int, err error) {
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return -1, err
	}
	fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open a packet socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}()
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return -1, fmt.Errorf("find lo: %w", err)
	}
	lo := int(ifr.Uint32())
	raiseBuffer(fd)
	prog := unix.SockFprog{Len: uint16(len(refusalFilter)), Filter: &refusalFilter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return -1, fmt.Errorf("filter the packet socket: %w", err)
	}
	// Bound to lo alone: the socket taps no other device of any namespace.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo}); err != nil {
		return -1, fmt.Errorf("bind the packet socket to lo: %w", err)
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("open a netlink socket: %w", err)
	}
	defer unix.Close(nl)
	unlimitUnreachable()
	if err := catchAll(nl, unix.AF_INET, lo); err != nil {
		return -1, err
	}
	if ipv6Loopback() {
		// Where the namespace has IPv6 turned off, an IPv6 connection
		// finds no route: nothing to record.
		catchAll(nl, unix.AF_INET6, lo)
	}
	return fd, nil
}

// directBuffer is the receive buffer the packet socket asks for: a
// burst of some 20000 refusals held at once (each costs the socket about
// 400 bytes, whatever the filter keeps of the packet), which the reader
// then drains. A buffer's memory is taken only as
// packets wait in it.
const directBuffer = 8 << 20

// raiseBuffer raises the receive buffer of the packet socket fd to
// directBuffer: SO_RCVBUFFORCE where the process may (CAP_NET_ADMIN over
// the host's namespace: root's Enter), else SO_RCVBUF, which the kernel
// caps at net.core.rmem_max (212992 bytes by default: about 500
// refusals). What a burst overflows is counted (drain), not lost in
// silence.
func raiseBuffer(fd int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, directBuffer) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, directBuffer)
	}
}

// unlimitUnreachable exempts, in the calling thread's namespace, ICMP
// and ICMPv6 destination unreachable from the kernel's rate limits, so
// that every datagram caught is answered and recorded: an older kernel
// applies its global limit (net.ipv4.icmp_msgs_per_sec, 1000 a second in
// bursts of 50) on the loopback too, and a datagram left unanswered waits
// for its client's timeout. The masks are the
// namespace's own; where one cannot be written (an older kernel has no
// IPv6 mask) the limit stays, and only a burst loses answers.
func unlimitUnreachable() {
	// IPv4: the default mask (6168) without destination unreachable (3).
	if b, err := os.ReadFile("/proc/sys/net/ipv4/icmp_ratemask"); err == nil {
		if m, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			os.WriteFile("/proc/sys/net/ipv4/icmp_ratemask", []byte(strconv.Itoa(m&^(1<<3))), 0)
		}
	}
	// IPv6: the default mask ("0-1,3-127") without destination
	// unreachable (1).
	os.WriteFile("/proc/sys/net/ipv6/icmp/ratemask", []byte("0,3-127"), 0)
}

// htons returns v in network byte order, as a packet socket's protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// catchAll makes, for the address family fam, every address local to
// the namespace for TCP and UDP: the rules that read the local table for
// the loopback's addresses, for TCP, for ICMP port unreachable and for
// UDP, the rule of priority 0 (which reads
// it for everything) removed, then a route of type local for every
// address through lo in the local table. In this order a step that
// fails leaves a namespace whose loopback works and whose other
// addresses find no route: only the recording is lost.
func catchAll(nl int, fam uint8, lo int) error {
	// struct fib_rule_hdr: family, dst_len, src_len, tos, table, res1,
	// res2, action, flags.
	rule := func(dstLen uint8) []byte {
		return []byte{fam, dstLen, 0, 0, unix.RT_TABLE_LOCAL, 0, 0, unix.FR_ACT_TO_TBL, 0, 0, 0, 0}
	}
	table := rtattr(unix.FRA_TABLE, u32(unix.RT_TABLE_LOCAL))
	dst, dstLen := []byte{127, 0, 0, 0}, uint8(8)
	if fam == unix.AF_INET6 {
		dst, dstLen = make([]byte, 16), 128
		dst[15] = 1 // ::1
	}
	if err := netlinkDo(nl, unix.RTM_NEWRULE, rule(dstLen), table, rtattr(unix.FRA_DST, dst), rtattr(unix.FRA_PRIORITY, u32(loopbackPriority))); err != nil {
		return fmt.Errorf("add the rule for the loopback: %w", err)
	}
	if err := netlinkDo(nl, unix.RTM_NEWRULE, rule(0), table, rtattr(unix.FRA_PRIORITY, u32(tcpPriority)), rtattr(unix.FRA_IP_PROTO, []byte{unix.IPPROTO_TCP})); err != nil {
		return fmt.Errorf("add the rule for TCP (a kernel with policy routing, 4.17 or later): %w", err)
	}
	// The rule for the port unreachable errors first: a datagram caught
	// before it is answered would wait for its client's timeout.
	icmp, unreachable := byte(unix.IPPROTO_ICMP), uint16(icmpPortUnreachable)
	if fam == unix.AF_INET6 {
		icmp, unreachable = unix.IPPROTO_ICMPV6, icmpv6PortUnreachable
	}
	ports := binary.NativeEndian.AppendUint16(binary.NativeEndian.AppendUint16(nil, unreachable), unreachable) // struct fib_rule_port_range
	if err := netlinkDo(nl, unix.RTM_NEWRULE, rule(0), table, rtattr(unix.FRA_PRIORITY, u32(icmpPriority)), rtattr(unix.FRA_IP_PROTO, []byte{icmp}), rtattr(unix.FRA_DPORT_RANGE, ports)); err != nil {
		return fmt.Errorf("add the rule for ICMP port unreachable: %w", err)
	}
	if err := netlinkDo(nl, unix.RTM_NEWRULE, rule(0), table, rtattr(unix.FRA_PRIORITY, u32(udpPriority)), rtattr(unix.FRA_IP_PROTO, []byte{unix.IPPROTO_UDP})); err != nil {
		return fmt.Errorf("add the rule for UDP: %w", err)
	}
	// The first rule of the list that reads the local table: priority 0's.
	if err := netlinkDo(nl, unix.RTM_DELRULE, rule(0), table); err != nil {
		return fmt.Errorf("remove the rule that reads the local table: %w", err)
	}
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
	// scope, type, flags.
	rt := []byte{fam, 0, 0, 0, unix.RT_TABLE_LOCAL, unix.RTPROT_STATIC, unix.RT_SCOPE_HOST, unix.RTN_LOCAL, 0, 0, 0, 0}
	attrs := [][]byte{rtattr(unix.RTA_OIF, u32(uint32(lo)))}
	if fam == unix.AF_INET {
		// The route's source for a socket that connects: 127.0.0.1. A
		// route of type local otherwise gives the destination itself,
		// which for a broadcast or multicast address is no source, and
		// the connect fails ("invalid argument") before any datagram
		// could be recorded. (IPv6 picks ::1 by itself.)
		attrs = append(attrs, rtattr(unix.RTA_PREFSRC, []byte{127, 0, 0, 1}))
	}
	if err := netlinkDo(nl, unix.RTM_NEWROUTE, rt, attrs...); err != nil {
		return fmt.Errorf("add the catch-all route: %w", err)
	}
	return nil
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// rtattr encodes one netlink attribute, padded to 4 bytes.
func rtattr(typ uint16, v []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// netlinkDo sends one request that creates (or deletes) something, and
// reads the kernel's acknowledgement.
func netlinkDo(nl int, typ uint16, hdr []byte, attrs ...[]byte) error {
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	b = append(b, hdr...)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	flags := uint16(unix.NLM_F_REQUEST | unix.NLM_F_ACK)
	if typ != unix.RTM_DELRULE {
		flags |= unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], 1)
	if err := unix.Sendto(nl, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	ack := make([]byte, 256)
	n, _, err := unix.Recvfrom(nl, ack, 0)
	if err != nil {
		return err
	}
	if n < unix.NLMSG_HDRLEN+4 || binary.NativeEndian.Uint16(ack[4:]) != unix.NLMSG_ERROR {
		return errors.New("netlink: no acknowledgement")
	}
	if e := int32(binary.NativeEndian.Uint32(ack[unix.NLMSG_HDRLEN:])); e != 0 {
		return syscall.Errno(-e)
	}
	return nil
}

// recordDirect reads the refusals catchDirect's socket fd sees, until
// Close, and records each as a denied attempt. It owns fd. A second
// descriptor of the socket (directRef) keeps it open past the reader's
// close, for releaseDirect.
func (n *Net) recordDirect(fd int) {
	n.bypassErr = nil
	unix.SetNonblock(fd, true)
	if ref, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		n.directRef = ref
	}
	f := os.NewFile(uintptr(fd), "egress-direct")
	rc, err := f.SyscallConn()
	p := n.proxy
	if err != nil || !p.track(f) {
		f.Close()
		n.bypassErr = ErrClosed
		return
	}
	n.direct = rc
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.untrack(f)
		defer f.Close()
		// Read waits for the socket to be readable whenever the function
		// returns false; it returns once Close closes f.
		rc.Read(func(fd uintptr) bool {
			n.drain(fd)
			return false
		})
	}()
}

// releaseDirect releases the packet socket of recordDirect, once its
// reader has closed its descriptor, by closing the last one on a
// goroutine of its own: the kernel's release of a packet socket waits for
// an RCU grace period (synchronize_net), which need not hold Close.
func (n *Net) releaseDirect() {
	if n.directRef < 0 {
		return
	}
	ref := n.directRef
	n.directRef = -1
	go unix.Close(ref)
}

// drain records every refusal waiting on the socket fd, then counts
// those the kernel dropped unread (Lost, OnLost). The lock is held from
// a packet's read until it is recorded, so that Flush returns only once
// what was read is recorded.
func (n *Net) drain(fd uintptr) {
	n.directMu.Lock()
	defer n.directMu.Unlock()
	var buf [keepBytes]byte
	for {
		nb, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		if at, ok := refusal(buf[:nb]); ok {
			n.proxy.record(at)
		}
	}
	// The refusals the kernel dropped since the last read of the
	// counter, the buffer full (the read resets it): after the reads,
	// so that a Flush counts those dropped before it.
	if st, err := unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil && st.Drops > 0 {
		n.lost += int(st.Drops)
		if f := n.proxy.cfg.OnLost; f != nil {
			f(int(st.Drops))
		}
	}
}
