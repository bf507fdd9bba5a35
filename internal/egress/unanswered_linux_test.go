package egress

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSandboxNetCountersReadWhole: readFile reads a counters' file whole,
// whether it fits the buffer it is given or fills it (the buffer then
// grows), and reads nothing of a file that is not there.
func TestSandboxNetCountersReadWhole(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"smaller", 3000},
		{"the buffer's size", 16 << 10},
		{"larger", 40000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("Udp: 1 2 3\n"), tc.size/11+1)[:tc.size]
			p := filepath.Join(t.TempDir(), "snmp")
			if err := os.WriteFile(p, want, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 16<<10)
			for i := range 2 { // a second read, from the start again
				if got := readFile(f, &buf); !bytes.Equal(got, want) {
					t.Errorf("read %d: readFile() = %d bytes, want the file's %d", i, len(got), len(want))
				}
			}
		})
	}
	buf := make([]byte, 16)
	if got := readFile(nil, &buf); got != nil {
		t.Errorf("readFile(nil) = %q, want nil", got)
	}
}

// TestSandboxNetCountersOfProcOnly: the counters' descriptors a first
// stage sends are taken only where each is a file of procfs; otherwise
// every one of them is closed and the run has no counters.
func TestSandboxNetCountersOfProcOnly(t *testing.T) {
	open := func(t *testing.T, path string) int {
		t.Helper()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	closed := func(fd int) bool {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		return err == unix.EBADF
	}
	other := filepath.Join(t.TempDir(), "snmp")
	if err := os.WriteFile(other, []byte("Udp: 1 2 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		taken bool
	}{
		{"snmp", []string{"/proc/self/net/snmp"}, true},
		{"snmp and snmp6", []string{"/proc/self/net/snmp", "/proc/self/net/snmp6"}, true},
		{"a file elsewhere", []string{other}, false},
		{"snmp6 elsewhere", []string{"/proc/self/net/snmp", other}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.paths[len(tc.paths)-1]); err != nil {
				t.Skipf("%s: %v (no IPv6?)", tc.paths[len(tc.paths)-1], err)
			}
			var fds []int
			for _, p := range tc.paths {
				fds = append(fds, open(t, p))
			}
			c := countersOf(fds)
			if got := c != nil; got != tc.taken {
				t.Fatalf("countersOf(%s) taken = %v, want %v", tc.paths, got, tc.taken)
			}
			if c != nil {
				c.close()
			}
			for i, fd := range fds {
				if !closed(fd) {
					if !tc.taken {
						t.Errorf("descriptor %d (%s) left open", i, tc.paths[i])
					}
					unix.Close(fd)
				}
			}
		})
	}
}
