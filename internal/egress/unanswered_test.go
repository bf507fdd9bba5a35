package egress

import (
	"sync"
	"testing"
)

// TestSandboxNetUnansweredCounters: parseCounters reads, from a
// namespace's /proc/net/snmp and snmp6, the datagrams the kernel found
// no socket for (UDP and UDP-Lite, IPv4 and IPv6) and the destination
// unreachable errors it sent (ICMP and ICMPv6), whatever the order of
// the columns; text without them reads as not ok.
func TestSandboxNetUnansweredCounters(t *testing.T) {
	snmp := `Ip: Forwarding DefaultTTL InReceives
Ip: 2 64 1884714
Icmp: InMsgs InErrors OutMsgs OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutTimeExcds
Icmp: 7 0 40 0 0 30 1
IcmpMsg: InType3 OutType3
IcmpMsg: 7 30
Udp: InDatagrams NoPorts InErrors OutDatagrams
Udp: 1156 50 0 1163
UdpLite: InDatagrams NoPorts InErrors OutDatagrams
UdpLite: 0 2 0 0
`
	snmp6 := `Icmp6OutDestUnreachs            	9
Icmp6OutEchos                   	4
Udp6NoPorts                     	11
UdpLite6NoPorts                 	1
`
	refused, answered, ok := parseCounters([]byte(snmp), []byte(snmp6))
	if !ok || refused != 50+2+11+1 || answered != 30+9 {
		t.Errorf("parseCounters() = %d, %d, %v, want %d refused, %d answered, true", refused, answered, ok, 64, 39)
	}
	if _, _, ok := parseCounters([]byte("Ip: Forwarding\nIp: 2\n"), []byte(snmp6)); ok {
		t.Errorf("parseCounters() of a /proc/net/snmp without Udp and Icmp is ok, want not")
	}
	// A kernel without IPv6 has no snmp6: IPv4's alone.
	if refused, answered, ok := parseCounters([]byte(snmp), nil); !ok || refused != 52 || answered != 30 {
		t.Errorf("parseCounters() without snmp6 = %d, %d, %v, want 52, 30, true", refused, answered, ok)
	}
}

// TestSandboxNetUnansweredLost: the datagrams the namespace refused
// without an error (its rate limits, set back by a run as root on an
// older kernel, let no error out) are counted once each by OnLost and
// Lost as they grow, never twice, and a gap that shrinks (errors counted
// after their datagrams) counts nothing.
func TestSandboxNetUnansweredLost(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []int
	)
	n, err := New(&Config{OnLost: func(k int) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, k)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, c := range []struct{ refused, answered int }{{10, 10}, {15, 10}, {15, 10}, {20, 18}, {30, 30}, {40, 32}} {
		n.addUnanswered(c.refused, c.answered)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{5, 3}; len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("OnLost saw %v, want %v", seen, want)
	}
	if got := n.Lost(); got != 8 {
		t.Errorf("Lost() = %d, want 8", got)
	}
}
