package egress

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkSandboxNetSetup compares starting and waiting for /bin/true,
// plain and inside a new Net (New, Start or Wrap, Wait, Close): the
// namespace's cost per run.
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
	b.Run("namespace", func(b *testing.B) {
		for b.Loop() {
			n, err := New(&Config{Loopback: []string{"127.0.0.1:9"}})
			if err != nil {
				b.Fatal(err)
			}
			run(b, n)
			n.Close()
		}
	})
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
