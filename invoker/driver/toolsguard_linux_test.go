package driver

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// TestToolsGuardClientGone: a connection whose client closed its socket
// before the check (one that gave up while queued) is refused without a
// warning: which process opened it cannot be told, and it is no process
// of the run's trying the endpoint.
func TestToolsGuardClientGone(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Close()
	g := &toolsGuard{addr: s.LocalAddr().(*net.TCPAddr).AddrPort()}
	g.started(os.Getpid(), false)
	if why := g.direct(g.addr, c.LocalAddr().(*net.TCPAddr).AddrPort()); why != clientGone {
		t.Errorf("direct = %q, want %q", why, clientGone)
	}
	if evs := g.warnings(nil); len(evs) != 0 {
		t.Errorf("warnings %v for a client that gave up, want none", evs)
	}
}

// TestToolsGuardDroppedCounted: refusals beyond what the warnings queue
// holds are not dropped in silence: one more warning counts them.
func TestToolsGuardDroppedCounted(t *testing.T) {
	g := &toolsGuard{addr: netip.MustParseAddrPort("127.0.0.1:9")}
	for range maxPending + 5 {
		g.refused.add("it came from pid 1 (sh)")
	}
	evs := g.warnings(nil)
	if len(evs) != maxPending+1 || !strings.Contains(evs[maxPending].Text, "refused 5 more connections") {
		last := ""
		if len(evs) > 0 {
			last = evs[len(evs)-1].Text
		}
		t.Errorf("%d warnings, the last %q; want %d, the last counting the 5 dropped", len(evs), last, maxPending+1)
	}
	if evs := g.warnings(nil); len(evs) != 0 {
		t.Errorf("a second look gave %d warnings, want none", len(evs))
	}
}
