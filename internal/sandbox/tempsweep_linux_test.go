package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// TestSweepTemps: the runs' temporary directories of a program that is
// gone (its process ID free, or another process's) are removed, with what
// they hold; those of a live program, this one's, and directories whose
// name names no program are left.
func TestSweepTemps(t *testing.T) {
	defer goleak.VerifyNone(t)
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	st, ok := procStat(live.Process.Pid)
	if !ok {
		t.Fatal("cannot read the live process's stat")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{ // name → removed
		fmt.Sprintf("%d.%d-1", dead.Process.Pid, st.Start):   true,
		fmt.Sprintf("%d.%d-2", live.Process.Pid, st.Start+1): true, // its pid taken by another process
		fmt.Sprintf("%d.%d-3", live.Process.Pid, st.Start):   false,
		tempOwner() + "4": false,
		"5":               false, // names no program
	}
	for name := range dirs {
		dir := filepath.Join(os.TempDir(), tempPrefix+name)
		if err := os.MkdirAll(filepath.Join(dir, "go-build"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	sweepTemps()
	for name, removed := range dirs {
		_, err := os.Stat(filepath.Join(os.TempDir(), tempPrefix+name))
		if gone := os.IsNotExist(err); gone != removed {
			t.Errorf("%s%s: removed %v, want %v", tempPrefix, name, gone, removed)
		}
	}
}
