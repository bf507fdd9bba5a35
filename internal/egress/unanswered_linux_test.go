package egress

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
