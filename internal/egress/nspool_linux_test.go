package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// settleNamespaces waits for the goroutine making namespaces ahead, if
// any, and releases those kept: a test that counts descriptors counts
// none of the pool's.
func settleNamespaces() { namespaces.Settle() }

// keptNames returns the namespaces kept ready, as /proc/PID/ns/net reads
// them.
func keptNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for _, r := range namespaces.Kept() {
		var st unix.Stat_t
		if err := unix.Fstat(int(r.ns.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		names[fmt.Sprintf("net:[%d]", st.Ino)] = true
	}
	return names
}

// TestSandboxNetListenIn: listenIn's listeners are opened in the
// namespace visited, on a thread that is back in the host's namespace
// when it returns (and still the process's: it was not ended), never the
// main thread; a visit that fails in the namespace returns its error and
// no listener, its thread back too.
func TestSandboxNetListenIn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to join a namespace")
	}
	host, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var r *readyNS
	if err := sandbox.Retired(func() (err error) { r, err = makeReady(); return err }); err != nil {
		t.Fatal(err)
	}
	defer r.close()
	var st unix.Stat_t
	if err := unix.Fstat(int(r.ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	inside := fmt.Sprintf("net:[%d]", st.Ino)
	for _, fault := range []bool{false, true} {
		for range 10 {
			var tid int
			var seen string
			listen := func() ([]net.Listener, error) {
				tid = unix.Gettid()
				seen, _ = os.Readlink("/proc/thread-self/ns/net")
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return nil, err
				}
				return []net.Listener{l}, nil
			}
			if fault {
				visitFault = func() error { return errors.New("a visit made to fail") }
			}
			ls, err := listenIn(r.ns, listen)
			visitFault = nil
			for _, l := range ls {
				l.Close()
			}
			switch {
			case fault && (err == nil || len(ls) != 0 || tid != 0):
				t.Fatalf("a failing visit: %d listeners, listen called on %d, error %v; want none, not called, an error", len(ls), tid, err)
			case !fault && (err != nil || len(ls) != 1 || seen != inside):
				t.Fatalf("listenIn: %d listeners, opened in %s, error %v; want one, in %s", len(ls), seen, err, inside)
			case tid == unix.Getpid():
				t.Fatal("the main thread visited the namespace")
			}
			if tid != 0 {
				now, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
				if err != nil || now != host {
					t.Fatalf("the visiting thread %d is in %q (%v) after the visit, want %s", tid, now, err, host)
				}
			}
		}
	}
}

// TestSandboxNetNamespaceOncePerRun: a run's namespace is never another
// run's, whether it was made ahead (a kept one is taken: every run from
// the third on but the one after the kept ones were released) or made for
// the run (none ready); each is fresh (its counters at zero, its direct
// connections recorded); none is made ahead until runs follow each other
// (the second run), and from then on the kept ones are replaced once a
// run has started.
func TestSandboxNetNamespaceOncePerRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for Enter")
	}
	settleNamespaces()
	saved := namespaces
	namespaces = newNamespacePool() // the process's first run
	t.Cleanup(func() { namespaces.Close(); namespaces = saved })
	seen := map[string]int{}
	for i := range 6 {
		if i == 3 {
			settleNamespaces() // none kept: the run makes its own
		}
		kept := keptNames(t)
		if want := i >= 2 && i != 3; len(kept) > 0 != want {
			t.Errorf("run %d: %d namespaces kept ready as it starts, want some: %v", i, len(kept), want)
		}
		n, err := New(nil)
		if err != nil {
			t.Fatal(err)
		}
		var ns string
		if err := sandbox.Retired(func() error {
			if err := n.Enter(); err != nil {
				return err
			}
			var err error
			if ns, err = os.Readlink("/proc/thread-self/ns/net"); err != nil {
				return err
			}
			// Held to the end, so that no later namespace takes its
			// number.
			f, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				return err
			}
			t.Cleanup(func() { f.Close() })
			if n.counters == nil {
				return errors.New("the namespace's counters are not open")
			}
			if refused, answered, ok := n.counters.read(0); !ok || refused != 0 || answered != 0 {
				t.Errorf("run %d: the namespace's counters before its datagram: %d refused, %d answered (read: %v), want a fresh namespace's zeros", i, refused, answered, ok)
			}
			// A datagram refused in this namespace: its counters would
			// show it to a run given the namespace again.
			c, err := net.Dial("udp", "192.0.2.1:9")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := n.BypassRecorded(); err != nil {
			t.Errorf("run %d: BypassRecorded() = %v", i, err)
		}
		if refused, _, _ := n.counters.read(0); refused != 1 {
			t.Errorf("run %d: the namespace's counters show %d datagrams refused, want its own one", i, refused)
		}
		if j, ok := seen[ns]; ok {
			t.Errorf("run %d got namespace %s, run %d's", i, ns, j)
		}
		if len(kept) > 0 && !kept[ns] {
			t.Errorf("run %d got namespace %s, none of those kept ready %v", i, ns, kept)
		}
		seen[ns] = i
		cmd := exec.Command("/bin/true")
		if err := n.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		want := nsPoolSize
		if i == 0 {
			want = 0 // runs do not follow each other yet
		}
		namespaces.Wait()
		if got := len(keptNames(t)); got != want {
			t.Errorf("run %d started: %d namespaces kept ready, want %d", i, got, want)
		}
		n.Close()
		namespaces.Wait()
		if got := len(keptNames(t)); got != want {
			t.Errorf("after run %d: %d namespaces kept ready, want %d", i, got, want)
		}
	}
	settleNamespaces()
}

// TestSandboxNetKeptReadyAtPrepare: a run that takes a kept namespace
// finds it ready as Prepare returns, its proxy's listener the one opened
// ahead there and served, and its loopback endpoints' listeners, if any,
// opened there by a visit of a thread of the runtime's (listenIn, whose
// thread comes back: TestSandboxNetListenIn). Where the proxy's port is an endpoint's (the proxy
// moves), or the visit fails, the run opens them on Prepare's thread of
// its own (ready whenever that thread is done). Either way the endpoints
// and the proxy answer inside, and the run got a namespace kept ready.
func TestSandboxNetKeptReadyAtPrepare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for Enter")
	}
	for _, tc := range []struct {
		name      string
		loopback  []string
		fault     bool // the visit fails once in the namespace
		wantReady bool
	}{
		{"no endpoint", nil, false, true},
		{"an endpoint", []string{"127.0.0.1:9"}, false, true},
		{"two endpoints", []string{"127.0.0.1:9", "[::1]:9"}, false, true},
		{"an endpoint, the visit failing", []string{"127.0.0.1:9"}, true, false},
		// The proxy moves to the next port, and the listener opened
		// ahead on ProxyPort gives way to the endpoint's.
		{"an endpoint on the proxy's port", []string{"127.0.0.1:" + strconv.Itoa(ProxyPort)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settleNamespaces()
			saved := namespaces
			namespaces = newNamespacePool()
			t.Cleanup(func() { namespaces.Close(); namespaces = saved })
			visits := 0
			if tc.fault {
				visitFault = func() error { visits++; return errors.New("a visit made to fail") }
				t.Cleanup(func() { visitFault = nil })
			}
			for range 2 { // two runs that found none: runs follow each other
				namespaces.Take()
			}
			namespaces.Fill()
			namespaces.Wait()
			kept := keptNames(t)
			if len(kept) == 0 {
				t.Fatal("no namespace kept ready once runs follow each other")
			}
			n, err := New(&Config{Loopback: tc.loopback})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			n.Prepare()
			ready := false
			select {
			case <-n.made:
				ready = true
			default:
			}
			// With an endpoint, Prepare's thread may or may not be done
			// by now: only the readiness promised is asserted.
			if tc.wantReady && !ready {
				t.Error("namespace not ready as Prepare returns, want it ready")
			}
			if tc.fault && visits != 1 {
				t.Errorf("%d visits failed, want the one", visits)
			}

			var ns, status string
			if err := sandbox.Retired(func() error {
				if err := n.Enter(); err != nil {
					return err
				}
				var err error
				if ns, err = os.Readlink("/proc/thread-self/ns/net"); err != nil {
					return err
				}
				for _, ep := range tc.loopback {
					c, err := net.Dial("tcp", ep)
					if err != nil {
						return fmt.Errorf("the endpoint's listener inside: %w", err)
					}
					c.Close()
				}
				c, err := net.Dial("tcp", strings.TrimPrefix(n.ProxyURL(), "http://"))
				if err != nil {
					return err
				}
				defer c.Close()
				if _, err := io.WriteString(c, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n"); err != nil {
					return err
				}
				status, err = bufio.NewReader(c).ReadString('\n')
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !kept[ns] {
				t.Errorf("the run got namespace %s, none of those kept ready %v", ns, kept)
			}
			if want := "HTTP/1.1 403 "; !strings.HasPrefix(status, want) {
				t.Errorf("the proxy inside answered %q, want %q…", status, want)
			}
			// The forwarders' attempts (their dials find nothing on the
			// host) may be recorded yet or not.
			var through []Attempt
			for _, at := range n.Attempts() {
				if at.Method != MethodForward {
					through = append(through, at)
				}
			}
			if len(through) != 1 || through[0].Host != "denied.test" || through[0].Allowed {
				t.Errorf("Attempts() through the proxy = %+v, want the one denied request", through)
			}
		})
	}
	settleNamespaces()
}
