package procstat

import (
	"errors"
	"os"
	"testing"
)

// Read reads this process: its parent and a start time; a pid that names
// no process is the read's error, not ErrMalformed.
func TestRead(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil || st.PPID != os.Getppid() || st.Start == 0 || st.Threads < 1 || st.State == 'Z' {
		t.Errorf("Read(self) = %+v, %v; want the parent %d, a start time and a thread", st, err, os.Getppid())
	}
	if _, err := Read(-1); err == nil || errors.Is(err, ErrMalformed) {
		t.Errorf("Read(-1) error = %v, want the read's", err)
	}
}
