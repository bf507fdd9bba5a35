package egress

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// dualRig is a name, dual.test, whose addresses are ::1 and 127.0.0.1,
// and a listener at port on 127.0.0.1 (and on ::1 if both): what a
// dial of dual.test:port tries with both families (Happy Eyeballs).
type dualRig struct {
	resolver *net.Resolver
	port     int
}

func newDualRig(t *testing.T, both bool) dualRig {
	t.Helper()
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l4.Close() })
	port := l4.Addr().(*net.TCPAddr).Port
	if both {
		l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port)))
		if err != nil {
			t.Skipf("no IPv6 loopback to dial both families: %v", err)
		}
		t.Cleanup(func() { l6.Close() })
	} else if c, err := net.Dial("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		c.Close()
		t.Fatalf("[::1]:%d accepts a connection, want it refused", port)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go answerDual(pc)
	dns := pc.LocalAddr().String()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", dns)
	}}
	return dualRig{resolver: r, port: port}
}

// answerDual answers each DNS query on pc: an A query with 127.0.0.1,
// an AAAA query with ::1, whatever the name.
func answerDual(pc net.PacketConn) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		end := 12 // the question's name, then its type and class
		for end < len(q) && q[end] != 0 {
			end += int(q[end]) + 1
		}
		if n < 12 || end+5 > n {
			continue
		}
		qtype := binary.BigEndian.Uint16(q[end+1:])
		var rdata []byte
		switch qtype {
		case 1:
			rdata = []byte{127, 0, 0, 1}
		case 28:
			rdata = make([]byte, 16)
			rdata[15] = 1
		}
		m := append([]byte(nil), q[:end+5]...)
		m[2], m[3] = 0x84, 0x00 // a response, authoritative, no error
		binary.BigEndian.PutUint16(m[4:], 1)
		binary.BigEndian.PutUint16(m[8:], 0)
		binary.BigEndian.PutUint16(m[10:], 0)
		if rdata != nil {
			binary.BigEndian.PutUint16(m[6:], 1)
			m = append(m, 0xc0, 12) // the question's name
			m = binary.BigEndian.AppendUint16(m, qtype)
			m = binary.BigEndian.AppendUint16(m, 1)  // IN
			m = binary.BigEndian.AppendUint32(m, 60) // TTL
			m = binary.BigEndian.AppendUint16(m, uint16(len(rdata)))
			m = append(m, rdata...)
		} else {
			binary.BigEndian.PutUint16(m[6:], 0)
		}
		pc.WriteTo(m, from)
	}
}

// openKeys returns a copy of the keys in d.
func openKeys(d *Dials) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := map[string]int{}
	for k, n := range d.open {
		keys[k.String()] = n
	}
	return keys
}

// TestSandboxNetDialsLateAttempt: a dial of a name with addresses of
// both families returns on the first attempt's success without waiting
// for the other's; that attempt, going on after the dial returned,
// leaves no port of it in the set once it has ended and the connection
// is closed.
func TestSandboxNetDialsLateAttempt(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	rig := newDualRig(t, true)
	entered := make(chan struct{})   // the second attempt has come
	release := make(chan struct{})   // the dial has returned: the second may go on
	families := make(chan string, 2) // the attempts' networks, in order
	var calls atomic.Int32
	dialer := net.Dialer{FallbackDelay: time.Millisecond, Resolver: rig.resolver,
		Control: func(network, _ string, _ syscall.RawConn) error {
			families <- network
			if calls.Add(1) == 1 {
				<-entered
				return nil
			}
			close(entered)
			<-release
			return nil
		}}
	var d Dials
	c, key, ok, err := d.dial(context.Background(), dialer, "tcp", net.JoinHostPort("dual.test", strconv.Itoa(rig.port)))
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if !ok || !d.Has(c.LocalAddr().(*net.TCPAddr).AddrPort()) {
		t.Errorf("the connection's address %s is not in the set (key %v, ok %v)", c.LocalAddr(), key, ok)
	}
	d.remove(key)
	c.Close()
	close(release)
	// Until the second attempt's goroutine has ended.
	goleak.VerifyNone(t, goleak.IgnoreAnyFunction("github.com/clinvoke/clinvoke/internal/egress.answerDual"))
	if a, b := <-families, <-families; a == b {
		t.Errorf("both attempts were %s, want one of each family", a)
	}
	if keys := openKeys(&d); len(keys) != 0 {
		t.Errorf("the set holds %v once the connection is closed, want nothing", keys)
	}
}

// TestSandboxNetDialsFailedAttempt: when a dial's first address refuses
// it, that socket's key has left the set by the time the dial tries the
// next address, not once the whole dial returns; the connection made is
// in the set until it is removed.
func TestSandboxNetDialsFailedAttempt(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the other cleanups, which run first
	rig := newDualRig(t, false)
	var d Dials
	var networks []string
	var during map[string]int
	dialer := net.Dialer{FallbackDelay: time.Hour, Resolver: rig.resolver,
		Control: func(network, _ string, _ syscall.RawConn) error {
			networks = append(networks, network) // the fallback starts once the first attempt failed
			if len(networks) == 2 {
				during = openKeys(&d)
			}
			return nil
		}}
	c, key, ok, err := d.dial(context.Background(), dialer, "tcp", net.JoinHostPort("dual.test", strconv.Itoa(rig.port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(networks) != 2 || networks[0] != "tcp6" {
		t.Fatalf("the dial tried %v, want tcp6 (refused) then tcp4", networks)
	}
	if len(during) != 0 {
		t.Errorf("while the second address was tried, the set held %v, want nothing: the first's socket is closed", during)
	}
	if !ok || !d.Has(c.LocalAddr().(*net.TCPAddr).AddrPort()) {
		t.Errorf("the connection's address %s is not in the set (key %v, ok %v)", c.LocalAddr(), key, ok)
	}
	d.remove(key)
	if keys := openKeys(&d); len(keys) != 0 {
		t.Errorf("the set holds %v once the connection's key is removed, want nothing", keys)
	}
}
