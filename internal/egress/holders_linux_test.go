package egress

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// addrPort returns a's address and port, unmapped.
func addrPort(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// pids returns the pids of hs.
func pids(hs []Holder) []int {
	var out []int
	for _, h := range hs {
		out = append(out, h.Pid)
	}
	slices.Sort(out)
	return out
}

// TestSocketHolders finds the process at the other end of an accepted
// connection: a child's socket is the child's alone, not its parent's;
// the parent's own connection is the parent's; a copy the parent takes
// of the child's descriptor (pidfd_getfd) makes both its holders.
func TestSocketHolders(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Skipf("no %s loopback here: %v", network, err)
			}
			defer ln.Close()

			cmd := helperCmd("holdsocket", ln.Addr().String())
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				if err := cmd.Wait(); err != nil {
					t.Errorf("helper: %v", err)
				}
				if err := unix.Kill(cmd.Process.Pid, 0); !errors.Is(err, unix.ESRCH) {
					t.Errorf("helper %d still there after Wait: %v", cmd.Process.Pid, err)
				}
			}()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var childAddr string
			var childFd int
			if _, err := fmt.Fscan(bufio.NewReader(out), &childAddr, &childFd); err != nil {
				t.Fatal(err)
			}
			if addrPort(c.RemoteAddr()).String() != childAddr {
				t.Fatalf("accepted %s, the child says it is %s", c.RemoteAddr(), childAddr)
			}

			hs, err := SocketHolders(os.Getpid(), addrPort(c.RemoteAddr()), addrPort(c.LocalAddr()))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := pids(hs), []int{cmd.Process.Pid}; !slices.Equal(got, want) {
				t.Errorf("holders of the child's socket: %v, want %v (the child alone)", got, want)
			}
			if hs[0].Session != cmd.Process.Pid || hs[0].Comm == "" {
				t.Errorf("the child's holder %+v, want its own session %d and a name", hs[0], cmd.Process.Pid)
			}

			// The parent's own connection.
			own, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			oc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer oc.Close()
			hs, err = SocketHolders(os.Getpid(), addrPort(oc.RemoteAddr()), addrPort(oc.LocalAddr()))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := pids(hs), []int{os.Getpid()}; !slices.Equal(got, want) {
				t.Errorf("holders of the parent's own socket: %v, want %v", got, want)
			}

			// The child's descriptor taken by the parent: both hold it.
			pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pidfd)
			stolen, err := unix.PidfdGetfd(pidfd, childFd, 0)
			if errors.Is(err, unix.ENOSYS) {
				t.Skipf("pidfd_getfd: %v (Linux 5.6 and later)", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(stolen)
			hs, err = SocketHolders(os.Getpid(), addrPort(c.RemoteAddr()), addrPort(c.LocalAddr()))
			if err != nil {
				t.Fatal(err)
			}
			want := []int{os.Getpid(), cmd.Process.Pid}
			slices.Sort(want)
			if got := pids(hs); !slices.Equal(got, want) {
				t.Errorf("holders of the child's socket once copied: %v, want %v", got, want)
			}

			// No such socket.
			if _, err := SocketHolders(os.Getpid(), netip.MustParseAddrPort("127.0.0.1:1"), addrPort(c.LocalAddr())); !errors.Is(err, ErrNoSocket) {
				t.Errorf("an address of no socket: %v, want ErrNoSocket", err)
			}
		})
	}
}

// TestSocketHoldersRetry: a read of the socket tables that misses the
// socket (the kernel skips entries under churn) is not the answer: the
// lookup reads them again and finds the socket's holder.
func TestSocketHoldersRetry(t *testing.T) {
	defer goleak.VerifyNone(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	missed := false
	readTable = func(name string) ([]byte, error) {
		if !missed {
			missed = true
			return []byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"), nil
		}
		return os.ReadFile(name)
	}
	defer func() { readTable = os.ReadFile }()
	hs, err := SocketHolders(os.Getpid(), addrPort(c.LocalAddr()), addrPort(c.RemoteAddr()))
	if err != nil || !slices.Equal(pids(hs), []int{os.Getpid()}) {
		t.Errorf("SocketHolders() after a read that missed the socket = %+v, %v; want this process", hs, err)
	}
}
