package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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
