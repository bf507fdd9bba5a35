package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// helperEnv names the variable that makes the test binary run a helper
// instead of the tests.
const helperEnv = "EGRESS_TEST_HELPER"

// helperCmd returns the command that runs the helper name with args.
func helperCmd(name string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	return cmd
}

// runHelper runs the helper name and returns its exit code.
func runHelper(name string, args []string) int {
	switch name {
	case "inside":
		return inside(args)
	case "unprivileged":
		return unprivileged()
	case "true":
		return 0
	case "holdsocket":
		return holdSocket(args[0])
	case "flood":
		return flood(args[0], args[1], args[2:]...)
	case "broadcast":
		return broadcast(args)
	case "broadcastheard":
		return broadcastHeard()
	case "mountsetattr":
		return mountSetattr(args[0])
	}
	fmt.Fprintf(os.Stderr, "no helper %q\n", name)
	return 2
}

// inside runs in the namespace and prints, as one JSON object, what each
// way out gave: "STATUS BODY" or "error: …". args: the host's addresses
// that nothing forwards, then the forwarded one, then (optionally) the
// addresses to send UDP datagrams to.
func inside(args []string) int {
	direct, forwarded := args[0], args[1]
	out := map[string]string{}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}, Timeout: time.Minute}
	get := func(url string) string {
		resp, err := client.Get(url)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	out["http allowed"] = get("http://allowed.test/plain")
	out["http denied"] = get("http://denied.test/plain")
	out["forwarded"] = get("http://" + forwarded + "/fwd")
	out["connect allowed"] = connect(os.Getenv("HTTP_PROXY"), "allowed.test:80")
	// A connection to a listener of the run's own, aborted (a reset
	// that answers no SYN), is no refusal: nothing is recorded.
	out["own"] = ownAborted()
	// A datagram to any address but the run's own listeners is refused:
	// a connected socket reads "connection refused", at once; an
	// unconnected one sees nothing, but its datagram is refused all the
	// same.
	if len(args) > 2 {
		for _, a := range strings.Split(args[2], ",") {
			out["udp "+a] = udpRefused(a)
		}
		if c, err := net.ListenPacket("udp", ":0"); err == nil {
			if dst, err := net.ResolveUDPAddr("udp", "192.0.2.2:9"); err == nil {
				_, err := c.WriteTo([]byte("x"), dst)
				out["udp unconnected"] = fmt.Sprintf("sent: %v", err)
			}
			c.Close()
		}
		// A DNS lookup fails at once: its resolver's datagrams are refused.
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, "192.0.2.53:53")
		}}
		start := time.Now()
		_, err := r.LookupHost(context.Background(), "example.com")
		var dnsErr *net.DNSError
		out["dns"] = fmt.Sprintf("error: %v timeout=%v", err, errors.As(err, &dnsErr) && dnsErr.IsTimeout)
		out["dns took"] = time.Since(start).String()
	}
	for _, a := range strings.Split(direct, ",") {
		c, err := net.DialTimeout("tcp", a, time.Minute)
		if err != nil {
			out["direct "+a] = "error: " + err.Error()
		} else {
			c.Close()
			out["direct "+a] = "connected"
		}
	}
	// A packet socket, which would let a root run forge the resets the
	// host records, needs CAP_NET_RAW, which no run keeps.
	out["raw"] = rawSocket()
	// The namespace's ICMP rate masks, which its start sets.
	for k, f := range map[string]string{"ratemask": "/proc/sys/net/ipv4/icmp_ratemask", "ratemask6": "/proc/sys/net/ipv6/icmp/ratemask"} {
		b, _ := os.ReadFile(f)
		out[k] = strings.TrimSpace(string(b))
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "CapEff" || k == "CapPrm" || k == "CapAmb" || k == "CapBnd") {
			out[k] = strings.TrimSpace(v)
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// ownAborted connects to a listener of its own in the namespace and
// aborts the connection with a reset: "aborted", or "error: …".
func ownAborted() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "error: " + err.Error()
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		return "error: " + err.Error()
	}
	s.(*net.TCPConn).SetLinger(0)
	s.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "reset") {
		return fmt.Sprintf("error: read after the reset: %v", err)
	}
	return "aborted"
}

// connect opens a tunnel to target through proxy and sends a GET through
// it, as a TLS client would send its handshake.
func connect(proxy, target string) string {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(proxy, "http://"), time.Minute)
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// unprivileged prints what Probe and Enter say to this user: "probe:
// unavailable=BOOL ERROR" and "enter: unavailable=BOOL ERROR".
func unprivileged() int {
	report := func(what string, err error) {
		_, isNS := err.(*NamespaceError)
		fmt.Printf("%s: unavailable=%v namespaceerror=%v %v\n", what, errors.Is(err, ErrUnavailable), isNS, err)
	}
	report("probe", Probe())
	n, err := New(nil)
	if err != nil {
		report("new", err)
		return 1
	}
	report("enter", sandbox.Retired(n.Enter))
	n.Close()
	return 0
}

// holdSocket connects to addr, prints its end's address and descriptor,
// and holds the connection until its standard input ends.
func holdSocket(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %d\n", c.LocalAddr(), f.Fd())
	io.Copy(io.Discard, os.Stdin)
	f.Close()
	c.Close()
	return 0
}

// udpRefused sends a datagram to addr from a connected socket and reads
// the answer: "error: …" ("connection refused" where the namespace
// refused it), or what came back.
func udpRefused(addr string) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		return "error: " + err.Error()
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var b [16]byte
	n, err := c.Read(b[:])
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("answered %q", b[:n])
}

// broadcast sends one datagram to each address of args from an
// unconnected socket allowed to broadcast (SO_BROADCAST), and one from a
// socket connected to it (as bash's /dev/udp does; Go's sockets may
// broadcast; a link-local IPv6 group on the loopback), and prints what
// each send returned, as {"ADDR": "sent: <nil>", "connected ADDR":
// "sent: <nil>"}.
func broadcast(args []string) int {
	out := map[string]string{}
	for _, a := range args {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		network := "udp4"
		if ap.Addr().Is6() {
			network = "udp6"
		}
		c, err := net.ListenPacket(network, ":0")
		if err == nil {
			err = setBroadcast(c.(*net.UDPConn))
			if err == nil {
				_, err = c.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(ap))
			}
			c.Close()
		}
		out[a] = fmt.Sprintf("sent: %v", err)
		to := ap.Addr()
		if to.IsLinkLocalMulticast() {
			to = to.WithZone("lo")
		}
		cc, err := net.Dial("udp", netip.AddrPortFrom(to, ap.Port()).String())
		if err == nil {
			_, err = cc.Write([]byte("x"))
			cc.Close()
		}
		out["connected "+a] = fmt.Sprintf("sent: %v", err)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// broadcastHeard sends a datagram to the loopback's broadcast address at
// the port a socket of its own listens on (every address), reads it
// there, and prints the port and what it read.
func broadcastHeard() int {
	l, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	port := l.LocalAddr().(*net.UDPAddr).Port
	c, err := net.ListenPacket("udp4", ":0")
	if err == nil {
		defer c.Close()
		if err = setBroadcast(c.(*net.UDPConn)); err == nil {
			_, err = c.WriteTo([]byte("heard"), &net.UDPAddr{IP: net.IPv4(127, 255, 255, 255), Port: port})
		}
	}
	b := make([]byte, 16)
	n := 0
	if err == nil {
		l.SetReadDeadline(time.Now().Add(time.Minute))
		n, _, err = l.ReadFrom(b)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{"port": strconv.Itoa(port), "read": fmt.Sprintf("%q %v", b[:n], err)})
	return 0
}

// flood sends count datagrams at once from one unconnected socket to
// addr's host, one to each port from addr's on (below the ephemeral
// ports: one to the socket's own port would come back to it), and prints
// how many were sent, as {"sent": "N"}. With "ratemask", it first sets
// the namespace's ICMP and ICMPv6 rate masks back to limit destination
// unreachable, as a run as root can, and prints what the writes
// returned too ({"ratemask": "<nil>"}).
func flood(addr, count string, opts ...string) int {
	out := map[string]string{}
	if slices.Contains(opts, "ratemask") {
		out["ratemask"] = fmt.Sprint(errors.Join(
			os.WriteFile("/proc/sys/net/ipv4/icmp_ratemask", []byte("6176"), 0),
			os.WriteFile("/proc/sys/net/ipv6/icmp/ratemask", []byte("0-127"), 0)))
	}
	n, err := strconv.Atoi(count)
	dst, rerr := netip.ParseAddrPort(addr)
	c, lerr := net.ListenPacket("udp", ":0")
	if err = errors.Join(err, rerr, lerr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	sent := 0
	for i := range n {
		to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr(), dst.Port()+uint16(i)))
		if _, err := c.WriteTo([]byte("x"), to); err == nil {
			sent++
		}
	}
	out["sent"] = strconv.Itoa(sent)
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}
