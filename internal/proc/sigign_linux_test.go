//go:build linux

package proc

import (
	"bufio"
	"os"
	"strconv"
	"syscall"
	"testing"
)

func TestSigIgn(t *testing.T) {
	tests := []struct {
		name   string
		status string
		want   uint64
		ok     bool
	}{
		{"none", "Name:\tcat\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n", 0, true},
		{"SIGINT", "SigIgn:\t0000000000000002\n", 1 << 1, true},
		{"SIGINT and SIGTERM, as nohup sh -c 'cmd &' leaves them", "SigBlk:\t0000000000004002\nSigIgn:\t0000000000004002\n", 1<<1 | 1<<14, true},
		{"a blocked signal is not ignored", "SigBlk:\t0000000000000002\nSigIgn:\t0000000000000000\n", 0, true},
		{"last line without a newline", "Name:\tx\nSigIgn:\t0000000000001000", 1 << 12, true},
		{"no SigIgn line", "Name:\tx\nState:\tZ (zombie)\n", 0, false},
		{"not hexadecimal", "SigIgn:\tzz\n", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := sigIgn([]byte(tt.status))
			if got != tt.want || ok != tt.ok {
				t.Errorf("sigIgn(%q) = %#x, %v; want %#x, %v", tt.status, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// Ignores reads the root's dispositions as they are: none ignored, both
// ignored by the process itself, and SIGINT ignored by the process that
// exec'd it.
func TestIgnores(t *testing.T) {
	tests := []struct {
		name      string
		helper    []string
		int, term bool
	}{
		{"handles both", []string{"hang"}, false, false},
		{"ignores both", []string{"hangignore"}, true, true},
		{"inherits SIGINT ignored across exec", []string{"execignoring", "SIGINT", "hang"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRun(t, Attr{}, tt.helper[0], tt.helper[1:]...)
			r.awaitPids(1) // the helper has set its dispositions
			if got := r.tree.Ignores(Interrupt); got != tt.int {
				t.Errorf("Ignores(Interrupt) = %v, want %v", got, tt.int)
			}
			if got := r.tree.Ignores(Terminate); got != tt.term {
				t.Errorf("Ignores(Terminate) = %v, want %v", got, tt.term)
			}
			if r.tree.Ignores(Kill) {
				t.Error("Ignores(Kill) = true, want false")
			}
			r.tree.Kill()
			r.wait()
		})
	}
}

// A /proc/PID/status longer than readSigIgn's buffer (a process in
// thousands of supplementary groups) is read whole: the SigIgn line after
// the long Groups line is found.
func TestReadSigIgnLongStatus(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a process thousands of supplementary groups")
	}
	groups := make([]uint32, 2000)
	for i := range groups {
		groups[i] = uint32(100000 + i)
	}
	cmd := helperCmd("execignoring", "SIGINT", "hang")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Groups: groups}}
	cmd.Stdout = nil // the helper's report comes through the pipe
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("the helper did not report: %v", err)
	}
	pid := cmd.Process.Pid
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if len(status) <= 4096 {
		t.Fatalf("/proc/%d/status holds %d bytes, want more than readSigIgn's buffer", pid, len(status))
	}
	mask, ok := readSigIgn(int32(pid))
	if !ok || mask&(1<<(syscall.SIGINT-1)) == 0 {
		t.Errorf("readSigIgn(%d) = %#x, %v; want SIGINT ignored", pid, mask, ok)
	}
}
