package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A connection that bypasses the proxy (a socket to 192.0.2.1:80, or to
// a server on the host's loopback that the run was not given) would be
// refused by the namespace's kernel before anything could see it: no
// route, or no listener. catchDirect makes every such attempt a refusal
// the host sees. A route of type local for every address (in the local
// table, as the kernel wants of an address a socket connects from) makes
// every address the namespace's own for TCP: the policy rules that read
// the local table are replaced by one for the loopback's addresses (every
// protocol) and one for TCP, so that a UDP datagram or a ping to an
// outside address still finds no route ("network is unreachable"). A
// SYN to any address and port is then delivered on the loopback, where
// nothing listens but the proxy and the forwarders, and the kernel
// answers at once with a reset ("connection refused"). A
// packet socket bound to the loopback keeps those resets (a classic BPF
// filter drops everything else in the kernel), and the host reads them:
// each names the address and port a connection was tried to.

// The priorities of catchDirect's rules: before the main table's (32766).
const (
	loopbackPriority = 1 // the loopback's addresses, every protocol
	tcpPriority      = 2 // TCP, every address
)

// skfPktType is SKF_AD_OFF + SKF_AD_PKTTYPE: a classic BPF load of the
// packet's type (host, outgoing, …) instead of its bytes.
const skfPktType = 0xfffff000 + 4

// resetFilter keeps the TCP resets the namespace receives (IPv4 or IPv6
// without extension headers), each copy once: the loopback shows a packet
// as sent and again as received. The offsets are the network header's: a
// SOCK_DGRAM packet socket sees no link-layer header.
var resetFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: skfPktType},                    // 0: A = the packet's type
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.PACKET_OUTGOING, Jt: 14}, // 1: sent: drop
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 0},                             // 2: A = version and length
	{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0xf0},                         // 3
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x60, Jt: 6},                  // 4: IPv6: to 11
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x40, Jf: 10},                 // 5: not IPv4: drop
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9},                             // 6: A = protocol
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_TCP, Jf: 8},      // 7: not TCP: drop
	{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},                            // 8: X = IPv4 header's length
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 13},                            // 9: A = TCP flags
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: tcpRST, Jt: 4, Jf: 5},        // 10: RST: keep
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 6},                             // 11: A = IPv6 next header
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.IPPROTO_TCP, Jf: 3},      // 12: not TCP: drop
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 40 + 13},                       // 13: A = TCP flags
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: tcpRST, Jf: 1},               // 14: RST: keep
	{Code: unix.BPF_RET | unix.BPF_K, K: 128},                                         // 15: keep the headers
	{Code: unix.BPF_RET | unix.BPF_K},                                                 // 16: drop
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
	prog := unix.SockFprog{Len: uint16(len(resetFilter)), Filter: &resetFilter[0]}
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

// htons returns v in network byte order, as a packet socket's protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// catchAll makes, for the address family fam, every address local to
// the namespace for TCP: the rules that read the local table for the
// loopback's addresses and for TCP, the rule of priority 0 (which reads
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
	// The first rule of the list that reads the local table: priority 0's.
	if err := netlinkDo(nl, unix.RTM_DELRULE, rule(0), table); err != nil {
		return fmt.Errorf("remove the rule that reads the local table: %w", err)
	}
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
	// scope, type, flags.
	rt := []byte{fam, 0, 0, 0, unix.RT_TABLE_LOCAL, unix.RTPROT_STATIC, unix.RT_SCOPE_HOST, unix.RTN_LOCAL, 0, 0, 0, 0}
	if err := netlinkDo(nl, unix.RTM_NEWROUTE, rt, rtattr(unix.RTA_OIF, u32(uint32(lo)))); err != nil {
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

// drain records every refusal waiting on the socket fd. The lock is held
// from a packet's read until it is recorded, so that Flush returns only
// once what was read is recorded.
func (n *Net) drain(fd uintptr) {
	n.directMu.Lock()
	defer n.directMu.Unlock()
	var buf [128]byte
	for {
		nb, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT)
		if err != nil {
			return
		}
		if at, ok := refusal(buf[:nb]); ok {
			n.proxy.record(at)
		}
	}
}
