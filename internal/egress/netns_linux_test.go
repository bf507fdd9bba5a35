package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/clinvoke/clinvoke/internal/sandbox"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// startInside starts cmd by Enter, as the hook that forks a run's first
// process does.
func startInside(n *Net, cmd *exec.Cmd) error { return n.Start(cmd) }

// runInside runs the helper inside with args in n, started by start with
// env added to its environment, waits for it, closes n and returns what
// the helper printed.
func runInside(t *testing.T, n *Net, start func(*Net, *exec.Cmd) error, env []string, args ...string) map[string]string {
	t.Helper()
	cmd := helperCmd("inside", args...)
	cmd.Env = n.MergeEnv(append(cmd.Env, env...))
	return runHelperInside(t, n, start, cmd, nil)
}

// runHelperInside runs cmd, a helper, in n's namespace, started by
// start, calls exited (if non-nil) once it has exited or failed to
// start, closes n and returns what the helper printed (one JSON object).
func runHelperInside(t *testing.T, n *Net, start func(*Net, *exec.Cmd) error, cmd *exec.Cmd, exited func()) map[string]string {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := start(n, cmd); err != nil {
		if exited != nil {
			exited()
		}
		n.Close()
		t.Fatal(err)
	}
	err := cmd.Wait()
	if exited != nil {
		exited()
	}
	n.Close()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("helper printed %q: %v", out.String(), err)
	}
	return got
}

// hostAddr returns a non-loopback address of this host, if it has one.
func hostAddr() (netip.Addr, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// startWrapped starts cmd through Wrap, the route without CAP_SYS_ADMIN.
func startWrapped(n *Net, cmd *exec.Cmd) error {
	if err := n.Wrap(cmd); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := n.Started(); err != nil {
		cmd.Wait()
		return err
	}
	return nil
}

// TestSandboxNetChild: a child started in the namespace, by each route
// (Enter on the thread that forks it, as root; Wrap, as root and as an
// unprivileged user), reaches an allowed host through the proxy (plain HTTP and a
// CONNECT tunnel) and a forwarded loopback endpoint at the host's
// address, is refused a denied host (recorded), and reaches nothing
// directly: not a server on the host's loopback, not one on the host's
// other addresses, not an outside address (IPv4 and IPv6). Each direct
// connection is refused at once ("connection refused": the dial returns
// an error, not a timeout) and recorded as a denied MethodDirect attempt
// naming its address and port. So is every UDP datagram to an address
// outside or to the loopback where nothing listens (IPv4 and IPv6), as a
// denied MethodDirectUDP attempt: a connected socket reads "connection
// refused", an unconnected one's datagram is recorded all the same, and a
// DNS lookup fails at once ("connection refused", not a timeout).
func TestSandboxNetChild(t *testing.T) {
	t.Run("enter", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a network namespace; TestSandboxNetUnprivileged covers this user")
		}
		sandboxNetChild(t, startInside)
	})
	t.Run("wrap", func(t *testing.T) {
		if err := ProbeWrap(); err != nil {
			t.Skipf("this host gives no unprivileged user namespace: %v", err)
		}
		sandboxNetChild(t, startWrapped)
	})
	t.Run("wrap_as_nobody", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to switch to an unprivileged user; as that user, wrap covers this")
		}
		out := runAsNobody(t, "", "-test.run=^TestSandboxNetChild$/^wrap$", "-test.v")
		if !strings.Contains(out, "--- PASS: TestSandboxNetChild/wrap ") {
			t.Errorf("TestSandboxNetChild/wrap as nobody did not pass:\n%s", out)
		}
	})
}

func sandboxNetChild(t *testing.T, start func(*Net, *exec.Cmd) error) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	hidden := serveHTTP(t, "0.0.0.0:0")        // reachable from the host at every address, from inside at none
	_, port, _ := net.SplitHostPort(hidden)
	forwarded := serveHTTP(t, "127.0.0.1:0")
	direct := []string{"127.0.0.1:" + port, "192.0.2.1:80"}
	if a, ok := hostAddr(); ok {
		direct = append(direct, net.JoinHostPort(a.String(), port))
	}
	udp := []string{"192.0.2.1:53", "127.0.0.1:" + port}
	if ipv6Loopback() {
		direct = append(direct, "[2001:db8::1]:443")
		udp = append(udp, "[2001:db8::1]:443")
	}
	var (
		mu       sync.Mutex
		recorded []Attempt
	)
	n, err := New(&Config{
		Allow:    []Rule{{Host: "allowed.test", Port: 80}},
		Loopback: []string{forwarded},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, "127.0.0.1:"+port) // allowed.test is the hidden server
		},
		OnAttempt: func(a Attempt) {
			mu.Lock()
			recorded = append(recorded, a)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An inherited NO_PROXY or proxy of the host's must not matter.
	got := runInside(t, n, start, []string{"NO_PROXY=allowed.test,denied.test", "HTTPS_PROXY=http://192.0.2.1:1"}, strings.Join(direct, ","), forwarded, strings.Join(udp, ","))
	t.Logf("inside the namespace: %v", got)
	for k, want := range map[string]string{
		"http allowed":    "200 hello from /plain",
		"connect allowed": "200 hello from /tunnel",
		"forwarded":       "200 hello from /fwd",
		"http denied":     "403 clinvoke egress: denied.test:80 denied: not in the allowlist",
		"own":             "aborted",
	} {
		if !strings.HasPrefix(got[k], want) {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
	if os.Geteuid() != 0 {
		for _, k := range []string{"CapEff", "CapPrm", "CapAmb"} {
			if got[k] != "0000000000000000" {
				t.Errorf("%s = %q inside: the run kept a capability", k, got[k])
			}
		}
	}
	// A run as root holds neither CAP_NET_ADMIN (bit 12), which would
	// let it delete the rules that record its direct connections, nor
	// CAP_NET_RAW (bit 13), which would let it forge their resets, nor
	// can an execve give them back (its bounding set); a user's run holds
	// no capability at all (above).
	caps := []string{"CapEff", "CapPrm"}
	if os.Geteuid() == 0 {
		caps = append(caps, "CapBnd")
	}
	for _, k := range caps {
		v, err := strconv.ParseUint(got[k], 16, 64)
		if err != nil || v&(1<<unix.CAP_NET_ADMIN|1<<unix.CAP_NET_RAW) != 0 {
			t.Errorf("%s = %q inside: the run kept CAP_NET_ADMIN or CAP_NET_RAW", k, got[k])
		}
	}
	if g := got["raw"]; !strings.Contains(g, "operation not permitted") {
		t.Errorf("a packet socket inside: %q, want an error: operation not permitted", g)
	}
	for _, a := range direct {
		if g := got["direct "+a]; !strings.HasPrefix(g, "error: ") || !strings.Contains(g, "connection refused") {
			t.Errorf("direct %s: %q, want an error: connection refused", a, g)
		}
	}
	for _, a := range udp {
		if g := got["udp "+a]; !strings.HasPrefix(g, "error: ") || !strings.Contains(g, "connection refused") {
			t.Errorf("udp %s: %q, want an error: connection refused", a, g)
		}
	}
	// Destination unreachable (3; ICMPv6's 1) is exempt from the
	// namespace's rate limits, so that a burst is answered in full.
	if m, err := strconv.Atoi(got["ratemask"]); err != nil || m&(1<<3) != 0 {
		t.Errorf("net.ipv4.icmp_ratemask inside = %q, want destination unreachable (bit 3) clear", got["ratemask"])
	}
	if g := got["ratemask6"]; ipv6Loopback() && g != "0,3-127" {
		t.Errorf("net.ipv6.icmp.ratemask inside = %q, want 0,3-127", g)
	}
	if g := got["udp unconnected"]; g != "sent: <nil>" {
		t.Errorf("udp 192.0.2.2:9 unconnected: %q, want sent", g)
	}
	if g := got["dns"]; !strings.Contains(g, "connection refused") || !strings.HasSuffix(g, "timeout=false") {
		t.Errorf("a DNS lookup: %q, want an error: connection refused, not a timeout", g)
	}
	if err := n.BypassRecorded(); err != nil {
		t.Errorf("BypassRecorded() = %v", err)
	}
	if n.counters == nil {
		t.Errorf("the Net opened no counters of the namespace: a datagram left unanswered would go uncounted")
	}
	// recorded was written by the proxy's goroutines, all ended by Close.
	mu.Lock()
	defer mu.Unlock()
	var summary []string
	for _, a := range recorded {
		summary = append(summary, a.Method+" "+net.JoinHostPort(a.Host, strconv.Itoa(a.Port))+" "+map[bool]string{true: "allowed", false: "denied"}[a.Allowed])
		if a.Allowed && (a.Sent == 0 || a.Received == 0 || a.Err != "") {
			t.Errorf("%+v: an allowed attempt without bytes both ways, or with an error", a)
		}
	}
	wants := []string{"GET allowed.test:80 allowed", "GET denied.test:80 denied", "CONNECT allowed.test:80 allowed", "FORWARD " + forwarded + " allowed"}
	for _, a := range direct {
		wants = append(wants, MethodDirect+" "+a+" denied")
	}
	for _, a := range append(udp, "192.0.2.2:9", "192.0.2.53:53") {
		wants = append(wants, MethodDirectUDP+" "+a+" denied")
	}
	for _, want := range wants {
		if !slices.Contains(summary, want) {
			t.Errorf("attempts %q lack %q", summary, want)
		}
	}
	// The resolver's datagrams are one attempt each, as many as it
	// sends: the distinct ones are counted.
	slices.Sort(summary)
	if distinct := slices.Compact(slices.Clone(summary)); len(distinct) != len(wants) {
		t.Errorf("attempts %q, want %d distinct", summary, len(wants))
	}
	if !equalAttempts(recorded, n.Attempts()) {
		t.Errorf("Attempts() = %+v, OnAttempt saw %+v", n.Attempts(), recorded)
	}
}

// onBothRoutes runs run on each route into a network namespace: "enter"
// (root's: the namespace made by this process) and "wrap" (a user's: made
// in a user namespace of the run's own), each skipped where this host or
// user cannot take it.
func onBothRoutes(t *testing.T, run func(*testing.T, func(*Net, *exec.Cmd) error)) {
	t.Run("enter", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a network namespace; wrap covers this user")
		}
		run(t, startInside)
	})
	t.Run("wrap", func(t *testing.T) {
		if err := ProbeWrap(); err != nil {
			t.Skipf("this host gives no unprivileged user namespace: %v", err)
		}
		run(t, startWrapped)
	})
}

// TestSandboxNetUDPFlood: a burst of datagrams around the proxy, more
// than the packet socket holds while its reader is held (by each route),
// is never lost in silence: each datagram is recorded as a refused
// MethodDirectUDP attempt, or counted by OnLost and Lost among the
// refusals the kernel dropped unread.
func TestSandboxNetUDPFlood(t *testing.T) {
	onBothRoutes(t, sandboxNetUDPFlood)
}

// udpTally counts the refused datagrams to one address a Net recorded and
// the refusals it counted lost.
type udpTally struct {
	mu             sync.Mutex
	recorded, lost int
}

// newTallyNet returns a Net whose refused datagrams to the address to and
// lost refusals the returned udpTally counts.
func newTallyNet(t *testing.T, to string) (*Net, *udpTally) {
	t.Helper()
	c := &udpTally{}
	n, err := New(&Config{
		OnAttempt: func(a Attempt) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if a.Method == MethodDirectUDP && a.Host == to && !a.Allowed {
				c.recorded++
			}
		},
		OnLost: func(k int) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.lost += k
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

// counts returns what c counted so far.
func (c *udpTally) counts() (recorded, lost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recorded, c.lost
}

func sandboxNetUDPFlood(t *testing.T, start func(*Net, *exec.Cmd) error) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	const count, to = 30000, "192.0.2.200"
	n, tally := newTallyNet(t, to)
	// The reader is held until the helper has exited: the burst meets
	// a socket nobody drains, as it would a reader outrun.
	n.directMu.Lock()
	cmd := helperCmd("flood", to+":1", strconv.Itoa(count))
	cmd.Env = n.MergeEnv(cmd.Env)
	got := runHelperInside(t, n, start, cmd, n.directMu.Unlock)
	if err := n.BypassRecorded(); err != nil {
		t.Fatalf("BypassRecorded() = %v", err)
	}
	recorded, lost := tally.counts()
	t.Logf("%d datagrams: %d recorded, %d lost", count, recorded, lost)
	if got["sent"] != strconv.Itoa(count) {
		t.Fatalf("the helper sent %s datagrams, want %d", got["sent"], count)
	}
	if recorded+lost != count {
		t.Errorf("%d datagrams: %d recorded and %d counted lost, want every one either", count, recorded, lost)
	}
	if lost == 0 {
		t.Errorf("%d datagrams to a socket nobody drained: none lost, want the socket's buffer overrun", count)
	}
	if n.Lost() != lost {
		t.Errorf("Lost() = %d, OnLost counted %d", n.Lost(), lost)
	}
}

// TestSandboxNetUnansweredBurst: a run as root (by each route) may set
// its namespace's ICMP rate masks back, so that an older kernel leaves a
// burst of its datagrams unanswered: the write succeeds (the namespace's
// /proc/sys/net is its root's, whatever capabilities it gave up), and
// the burst is never lost in silence all the same: each datagram is
// recorded or counted by OnLost and Lost, from the namespace's own
// counters, which the Net reads (they count the burst: not the host's).
func TestSandboxNetUnansweredBurst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a run of another user cannot write its namespace's rate masks")
	}
	t.Run("enter", func(t *testing.T) { sandboxNetUnansweredBurst(t, startInside) })
	t.Run("wrap", func(t *testing.T) {
		if err := ProbeWrap(); err != nil {
			t.Skipf("this host gives no unprivileged user namespace: %v", err)
		}
		sandboxNetUnansweredBurst(t, startWrapped)
	})
}

// runReadingCounters runs the helper cmd as runHelperInside does, and
// reads the namespace's counters once it has exited, before Close closes
// them: the datagrams refused, and whether they could be read.
func runReadingCounters(t *testing.T, n *Net, start func(*Net, *exec.Cmd) error, cmd *exec.Cmd) (got map[string]string, refused int, read bool) {
	t.Helper()
	got = runHelperInside(t, n, start, cmd, func() {
		if n.counters != nil {
			refused, _, read = n.counters.read(0)
		}
	})
	return got, refused, read
}

func sandboxNetUnansweredBurst(t *testing.T, start func(*Net, *exec.Cmd) error) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	const count, to = 3000, "192.0.2.201"
	n, tally := newTallyNet(t, to)
	cmd := helperCmd("flood", to+":1", strconv.Itoa(count), "ratemask")
	cmd.Env = n.MergeEnv(cmd.Env)
	got, refused, read := runReadingCounters(t, n, start, cmd)
	if err := n.BypassRecorded(); err != nil {
		t.Fatalf("BypassRecorded() = %v", err)
	}
	if got["ratemask"] != "<nil>" {
		t.Errorf("the run's write of its rate masks: %q, want it to succeed (the namespace's root owns them)", got["ratemask"])
	}
	if got["sent"] != strconv.Itoa(count) {
		t.Fatalf("the helper sent %s datagrams, want %d", got["sent"], count)
	}
	if !read || refused < count {
		t.Errorf("the namespace's counters read %d datagrams refused (read %v), want at least the %d of the burst", refused, read, count)
	}
	recorded, lost := tally.counts()
	t.Logf("%d datagrams with the masks set back: %d recorded, %d counted lost", count, recorded, lost)
	if recorded+lost != count {
		t.Errorf("%d datagrams: %d recorded and %d counted lost, want every one either", count, recorded, lost)
	}
}

// TestSandboxNetCountersExited: the route without CAP_SYS_ADMIN holds
// the namespace's counters however short the run: a run that sends a
// burst of datagrams and exits before the host has read the first
// stage's message (the host waits for its exit, leaving it unreaped,
// before Started) still has them read from its namespace's own counters,
// which the first stage opened and sent, and every datagram recorded or
// counted lost. As this user, and as nobody where the test runs as root.
func TestSandboxNetCountersExited(t *testing.T) {
	if err := ProbeWrap(); err != nil {
		t.Skipf("this host gives no unprivileged user namespace: %v", err)
	}
	t.Run("wrap", sandboxNetCountersExited)
	t.Run("wrap_as_nobody", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to switch to an unprivileged user; as that user, wrap covers this")
		}
		out := runAsNobody(t, "", "-test.run=^TestSandboxNetCountersExited$/^wrap$", "-test.v")
		if !strings.Contains(out, "--- PASS: TestSandboxNetCountersExited/wrap ") {
			t.Errorf("TestSandboxNetCountersExited/wrap as nobody did not pass:\n%s", out)
		}
	})
}

func sandboxNetCountersExited(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	const count, to = 200, "192.0.2.202"
	n, tally := newTallyNet(t, to)
	cmd := helperCmd("flood", to+":1", strconv.Itoa(count))
	cmd.Env = n.MergeEnv(cmd.Env)
	got, refused, read := runReadingCounters(t, n, startExited, cmd)
	if err := n.BypassRecorded(); err != nil {
		t.Fatalf("BypassRecorded() = %v", err)
	}
	if got["sent"] != strconv.Itoa(count) {
		t.Fatalf("the helper sent %s datagrams, want %d", got["sent"], count)
	}
	if !read || refused < count {
		t.Errorf("the namespace's counters read %d datagrams refused (read %v), want at least the %d the run sent before it exited", refused, read, count)
	}
	if recorded, lost := tally.counts(); recorded+lost != count {
		t.Errorf("%d datagrams: %d recorded and %d counted lost, want every one either", count, recorded, lost)
	}
}

// startExited starts cmd through Wrap and calls Started only once the
// run has exited (waited for without reaping it): its /proc/PID is there
// still, but its namespaces are gone.
func startExited(n *Net, cmd *exec.Cmd) error {
	if err := n.Wrap(cmd); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		cmd.Wait()
		return err
	}
	if err := n.Started(); err != nil {
		cmd.Wait()
		return err
	}
	return nil
}

// TestSandboxNetBroadcast: a datagram to a broadcast or multicast
// address, which the kernel answers with no error, is recorded by each
// route all the same, IPv4 and IPv6, as a denied MethodDirectUDP attempt
// naming the address and port: the limited broadcast, the loopback's
// broadcast, a subnet's broadcast of an address outside (which the
// namespace takes for one of its own, and refuses as any other),
// multicast groups of each family; each from an unconnected socket and
// from a connected one, whose connect succeeds as on any host (bash's
// /dev/udp connects).
func TestSandboxNetBroadcast(t *testing.T) {
	onBothRoutes(t, sandboxNetBroadcast)
}

func sandboxNetBroadcast(t *testing.T, start func(*Net, *exec.Cmd) error) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	to := []string{"255.255.255.255:67", "127.255.255.255:9", "192.168.77.255:137", "224.0.0.251:5353", "239.255.255.250:1900"}
	if ipv6Loopback() {
		to = append(to, "[ff02::1]:9", "[ff05::1:3]:547")
	}
	n, denied := newDeniedUDPNet(t)
	cmd := helperCmd("broadcast", to...)
	cmd.Env = n.MergeEnv(cmd.Env)
	got := runHelperInside(t, n, start, cmd, nil)
	if err := n.BypassRecorded(); err != nil {
		t.Fatalf("BypassRecorded() = %v", err)
	}
	recorded := denied()
	for _, a := range to {
		for _, k := range []string{a, "connected " + a} {
			if got[k] != "sent: <nil>" {
				t.Errorf("a datagram to %s: %q, want sent", k, got[k])
			}
		}
		if c := len(slices.DeleteFunc(slices.Clone(recorded), func(r string) bool { return r != a })); c != 2 {
			t.Errorf("the datagrams to %s recorded %d times, want twice (recorded: %q)", a, c, recorded)
		}
	}
}

// TestSandboxNetBroadcastHeard: a broadcast datagram that a process of
// the run receives itself (a socket of its own listens on the port) is
// recorded all the same, once, by each route: the namespace has no
// interface but the loopback, so each datagram its packet socket sees
// was sent by the run (the filter keeps the received copy of each, and
// drops the sent one, PACKET_OUTGOING), and which of them a socket took
// it does not show.
func TestSandboxNetBroadcastHeard(t *testing.T) {
	onBothRoutes(t, sandboxNetBroadcastHeard)
}

func sandboxNetBroadcastHeard(t *testing.T, start func(*Net, *exec.Cmd) error) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	n, denied := newDeniedUDPNet(t)
	cmd := helperCmd("broadcastheard")
	cmd.Env = n.MergeEnv(cmd.Env)
	got := runHelperInside(t, n, start, cmd, nil)
	if err := n.BypassRecorded(); err != nil {
		t.Fatalf("BypassRecorded() = %v", err)
	}
	if got["read"] != `"heard" <nil>` {
		t.Fatalf("the run's own listener read %s, want the broadcast", got["read"])
	}
	if want, recorded := []string{"127.255.255.255:" + got["port"]}, denied(); !slices.Equal(recorded, want) {
		t.Errorf("recorded %q, want %q: the broadcast, once", recorded, want)
	}
}

// newDeniedUDPNet returns a Net that records the refused datagrams its
// run sends around the proxy, and a function that returns them so far,
// each as its host:port.
func newDeniedUDPNet(t *testing.T) (*Net, func() []string) {
	var (
		mu       sync.Mutex
		recorded []string
	)
	n, err := New(&Config{OnAttempt: func(a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		if a.Method == MethodDirectUDP && !a.Allowed {
			recorded = append(recorded, net.JoinHostPort(a.Host, strconv.Itoa(a.Port)))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return n, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(recorded)
	}
}

// equalAttempts reports whether a and b hold the same attempts, in any
// order: OnAttempt and the list may see concurrent attempts in different
// orders.
func equalAttempts(a, b []Attempt) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// TestSandboxNetUnprivileged: a user without CAP_SYS_ADMIN gets a
// *NamespaceError matching ErrUnavailable and naming the capability,
// from Probe and from Enter. As root, the test runs itself as nobody.
func TestSandboxNetUnprivileged(t *testing.T) {
	var got string
	if os.Geteuid() != 0 {
		out, err := helperCmd("unprivileged").Output()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		got = string(out)
	} else {
		got = runAsNobody(t, "unprivileged")
	}
	t.Logf("as an unprivileged user:\n%s", got)
	for _, what := range []string{"probe", "enter"} {
		want := what + ": unavailable=true namespaceerror=true egress: cannot give the run its own network namespace: unshare(CLONE_NEWNET): operation not permitted: a network namespace needs CAP_SYS_ADMIN: run the program as root"
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// runAsNobody runs the helper name (or, if empty, the tests args select)
// as the user nobody, from a copy of the test binary nobody may run, and
// returns its output.
func runAsNobody(t *testing.T, name string, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "egress-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "egress.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd(name, args...)
	if name == "" {
		cmd.Env = os.Environ()
	}
	cmd.Path, cmd.Args[0], cmd.Dir = bin, bin, dir
	cmd.SysProcAttr = &unix.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestSandboxNetLocalhost: a loopback endpoint named localhost:PORT is
// reached inside at 127.0.0.1 and at ::1 alike, whichever of them the
// host's server listens on.
func TestSandboxNetLocalhost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for Enter; the forwarding is the same through Wrap")
	}
	if !ipv6Loopback() {
		t.Skip("this kernel has no IPv6: localhost is 127.0.0.1 alone")
	}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	srv := serveHTTP(t, "127.0.0.1:0") // IPv4 only
	_, port, _ := net.SplitHostPort(srv)
	n, err := New(&Config{Loopback: []string{"localhost:" + port}})
	if err != nil {
		t.Fatal(err)
	}
	got := runInside(t, n, startInside, nil, "127.0.0.1:1", "[::1]:"+port)
	if got["forwarded"] != "200 hello from /fwd" {
		t.Errorf("[::1]:%s inside, the host's server on 127.0.0.1 only: %q, want 200", port, got["forwarded"])
	}
}

// openFiles returns what this process's descriptors refer to, by number.
func openFiles(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out[e.Name()] = target
		}
	}
	return out
}

// TestSandboxNetCloseReleases: Close ends every goroutine of a Net and
// releases every descriptor it opened (the namespace's file, the
// listeners, the packet socket of the connections around the proxy,
// which it releases in the background), whether the namespace Prepare
// made was entered and a child ran in it, or was never entered; after
// Close, Prepare makes nothing and Enter returns ErrClosed.
func TestSandboxNetCloseReleases(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for Enter; Wrap's descriptors are the first stage's")
	}
	if err := Probe(); err != nil { // the runtime's own descriptors (the poller) opened before the count
		t.Fatal(err)
	}
	goleak.VerifyNone(t) // the probe's packet socket released
	for _, tc := range []struct {
		name string
		use  func(t *testing.T, n *Net)
	}{
		{"entered", func(t *testing.T, n *Net) {
			n.Prepare()
			cmd := exec.Command("/bin/true")
			if err := n.Start(cmd); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := n.BypassRecorded(); err != nil {
				t.Errorf("BypassRecorded() = %v", err)
			}
		}},
		{"prepared", func(t *testing.T, n *Net) { n.Prepare() }},
		{"entered from two threads", func(t *testing.T, n *Net) {
			// A start that forks again from another thread (a clone into
			// the cgroup refused, then the tracking fallback) enters again:
			// both threads are in the run's namespace, not the host's.
			host := threadNetns(t)
			var got [2]string
			for i := range got {
				if err := sandbox.Retired(func() error {
					if err := n.Enter(); err != nil {
						return err
					}
					var err error
					got[i], err = os.Readlink("/proc/thread-self/ns/net")
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			if got[0] == host || got[1] != got[0] {
				t.Errorf("namespaces entered: %q then %q, the host's %q: want the run's both times", got[0], got[1], host)
			}
		}},
		{"prepared, then closed", func(t *testing.T, n *Net) {
			n.Prepare()
			if err := sandbox.Retired(n.Enter); err != nil {
				t.Fatal(err)
			}
			n.Close()
			if err := sandbox.Retired(n.Enter); err != ErrClosed {
				t.Errorf("Enter() after Close = %v, want ErrClosed", err)
			}
		}},
		{"closed first", func(t *testing.T, n *Net) {
			n.Close()
			n.Prepare()
			if err := n.Enter(); err != ErrClosed {
				t.Errorf("Enter() after Close = %v, want ErrClosed", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settleNamespaces()
			before := openFiles(t)
			n, err := New(&Config{Loopback: []string{"127.0.0.1:9"}})
			if err != nil {
				t.Fatal(err)
			}
			tc.use(t, n)
			n.Close()
			settleNamespaces()   // the next run's, made ahead
			goleak.VerifyNone(t) // waits for the packet socket's release
			if after := openFiles(t); !maps.Equal(before, after) {
				t.Errorf("descriptors after Close: %v, want those before New: %v", after, before)
			}
		})
	}
}

// threadNetns returns the network namespace of the calling thread, as
// /proc/thread-self/ns/net names it.
func threadNetns(t *testing.T) string {
	ns, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
