package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
	"golang.org/x/sys/unix"
)

// TestSandboxStrayDescriptorStage: by a first stage (a user's route), a
// descriptor of the program without close-on-exec (one it inherited from
// its parent, or opened by cgo), to a file outside the ceiling, does not
// reach the run's program, which gets its standard descriptors and the
// files the command passes (ExtraFiles) at their numbers; the program's
// descriptor keeps its flags.
func TestSandboxStrayDescriptorStage(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	work := outsideTmpDir(t)
	outside := stagetest.OutsideTmp(t)
	stray := filepath.Join(outside, "stray")
	fd, err := unix.Open(stray, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	passed, err := os.Create(filepath.Join(work, "passed"))
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	cmd := exec.Command("/bin/ls", "-l", "/proc/self/fd")
	cmd.ExtraFiles = []*os.File{passed}
	serr, werr, out := stageRun(t, Policy{Level: ReadOnly, Workdir: work, Temp: work + "/t", Private: true}, cmd, nil)
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if strings.Contains(out, stray) {
		t.Errorf("the run holds %s:\n%s", stray, out)
	}
	// Beyond 0 to 3, only ls's own listing of /proc/self/fd.
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		if n := f[len(f)-3]; len(n) > 1 || n > "3" {
			if !strings.HasPrefix(f[len(f)-1], "/proc/") {
				t.Errorf("the run holds descriptor %s to %s, neither standard nor passed", n, f[len(f)-1])
			}
		}
	}
	if !strings.Contains(out, " 3 -> "+passed.Name()+"\n") {
		t.Errorf("the run holds no descriptor 3 to %s:\n%s", passed.Name(), out)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC != 0 {
		t.Errorf("the program's descriptor after the start: flags %#x, %v; want close-on-exec still clear", flags, err)
	}
}
