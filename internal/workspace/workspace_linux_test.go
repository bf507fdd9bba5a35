package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestOutsideProcLinks checks that a path through a link of the proc file
// system is outside, whatever it leads to in the host: such a link (a
// process's descriptor, working directory or root, /proc/self itself)
// leads where the process it names sees it, and the CLI is not the
// process the judge runs in. Here each leads, in the host, to a directory
// inside the working directory; for the CLI the same descriptor number
// may be any directory. Abs reports such a path as named.
func TestOutsideProcLinks(t *testing.T) {
	w, _ := layout(t)
	dir, err := os.Open(filepath.Join(w, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	fd := strconv.Itoa(int(dir.Fd()))
	pid, tid := strconv.Itoa(os.Getpid()), strconv.Itoa(syscall.Gettid())
	if err := os.Symlink("/proc/self/fd/"+fd, filepath.Join(w, "fdlink")); err != nil {
		t.Fatal(err)
	}
	r := New(w, nil)
	for _, p := range []string{
		"/proc/self/fd/" + fd + "/x",
		"/dev/fd/" + fd + "/x",
		"/proc/thread-self/fd/" + fd + "/x",
		"/proc/" + pid + "/fd/" + fd + "/x",
		"/proc/" + pid + "/task/" + tid + "/fd/" + fd + "/x",
		"/proc/" + pid + "/root" + w + "/x",
		filepath.Join(w, "fdlink", "x"),
	} {
		got := r.Outside(p, "")
		if !strings.Contains(got, "proc file system") {
			t.Errorf("Outside(%q) = %q, want it refused as a path through a link of the proc file system", p, got)
		}
		if abs := r.Abs(p, ""); len(abs) != 1 || abs[0] != filepath.Clean(p) {
			t.Errorf("Abs(%q) = %q, want the path as named", p, abs)
		}
	}
}
