package egress

import (
	"os"
	"os/exec"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// BenchmarkSandboxNetSetup compares starting and waiting for /bin/true,
// plain and inside a new Net (New, Start or Wrap, Wait, Close): the
// namespace's cost per run, with a loopback endpoint to forward and, on
// Enter's route, without one ("namespace-none": from the third run on, a
// kept namespace is ready as Prepare returns).
func BenchmarkSandboxNetSetup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for a network namespace")
	}
	run := func(b *testing.B, n *Net) {
		cmd := exec.Command("/bin/true")
		start := cmd.Start
		if n != nil {
			start = func() error { return n.Start(cmd) }
		}
		if err := start(); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			run(b, nil)
		}
	})
	for _, tc := range []struct {
		name     string
		loopback []string
	}{
		{"namespace", []string{"127.0.0.1:9"}},
		{"namespace-none", nil}, // no endpoint: a kept namespace is ready at Prepare
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				n, err := New(&Config{Loopback: tc.loopback})
				if err != nil {
					b.Fatal(err)
				}
				run(b, n)
				n.Close()
			}
		})
	}
	b.Run("wrap", func(b *testing.B) {
		for b.Loop() {
			n, err := New(&Config{Loopback: []string{"127.0.0.1:9"}})
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command("/bin/true")
			if err := startWrapped(n, cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			n.Close()
		}
	})
}

// BenchmarkSandboxNetJoin is a run's wait for its network namespace as
// the forking thread sees it, Prepare then Join at once (the worst case:
// no start work to overlap), on a thread of its own: "ready" takes a
// namespace the pool kept (nspool_linux.go), "made" finds none (the pool
// emptied outside the timer) and makes its own; "ready-endpoint" takes a
// kept one for a run with a loopback endpoint to forward (a model
// endpoint on the loopback), whose listener is opened there too. New,
// and Close with the pool's refill, are outside the timer.
func BenchmarkSandboxNetJoin(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for Enter's route")
	}
	for _, tc := range []struct {
		name     string
		ready    bool
		loopback []string
	}{
		{"ready", true, nil},
		{"made", false, nil},
		{"ready-endpoint", true, []string{"127.0.0.1:9"}},
	} {
		ready := tc.ready
		b.Run(tc.name, func(b *testing.B) {
			settleNamespaces()
			defer settleNamespaces()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if ready {
					namespaces.Wait() // the last Close's refill
				} else {
					settleNamespaces()
				}
				n, err := New(&Config{Loopback: tc.loopback})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				err = sandbox.Retired(func() error {
					n.Prepare()
					return n.Join()
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				n.Close()
				b.StartTimer()
			}
		})
	}
}
