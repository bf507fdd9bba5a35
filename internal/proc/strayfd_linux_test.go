//go:build linux

package proc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func init() {
	// fds: print "N TARGET" for each of the process's descriptors, then
	// "done".
	helpers["fds"] = func(args []string) int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for _, e := range ents {
			target, _ := os.Readlink("/proc/self/fd/" + e.Name())
			fmt.Println(e.Name(), target)
		}
		fmt.Println("done")
		return 0
	}
}

// openStray opens a file of the test's without close-on-exec, as a
// descriptor the program inherited from its parent is, and returns it and
// the file's path; it is closed after the test.
func openStray(t *testing.T) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stray")
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, path
}

// fdsOf returns the descriptors the helper fds of r listed, by target.
func fdsOf(r *run) map[string]int {
	got := map[string]int{}
	for {
		line := r.next()
		if line == "done" {
			break
		}
		n, target, _ := strings.Cut(line, " ")
		fd, _ := strconv.Atoi(n)
		got[target] = fd
	}
	r.wait()
	return got
}

// TestSandboxStrayDescriptor: a descriptor of the program without
// close-on-exec (one it inherited, or opened by cgo) does not reach a
// sandboxed root, which gets its standard descriptors and the engine's
// ExtraFiles at their numbers; the program's descriptor keeps its flags
// (it still lacks close-on-exec afterwards, for the program's own later
// children). A plain run inherits it, as os.StartProcess leaves it.
func TestSandboxStrayDescriptor(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		name      string
		sandboxed bool
	}{
		{"sandboxed", true},
		{"plain", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, stray := openStray(t)
			passed, err := os.Create(filepath.Join(t.TempDir(), "passed"))
			if err != nil {
				t.Fatal(err)
			}
			defer passed.Close()
			a := Attr{ExtraFiles: []*os.File{passed}}
			if tc.sandboxed {
				a.Restrict = sandboxed(t)
			}
			got := fdsOf(startRun(t, a, "fds"))
			if n, ok := got[stray]; ok != !tc.sandboxed {
				t.Errorf("the root holds %s: %v (descriptor %d); want %v", stray, ok, n, !tc.sandboxed)
			}
			if n, ok := got[passed.Name()]; !ok || n != 3 {
				t.Errorf("the passed file is the root's descriptor %d (%v), want 3\n%v", n, ok, got)
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 {
				t.Errorf("the program's descriptor after Start: flags %#x, %v; want close-on-exec still clear", flags, err)
			}
		})
	}
}

// TestSandboxStrayDescriptorConcurrent: sandboxed starts at the same
// time each keep the program's stray descriptor out of their root (one
// start's marks are not taken for the program's own by another), and the
// descriptor lacks close-on-exec once they all started.
func TestSandboxStrayDescriptorConcurrent(t *testing.T) {
	noLeaks(t)
	fd, stray := openStray(t)
	const n = 6
	markUsed("fds")
	restrict := sandboxed(t)
	cmd := helperCmd("fds")
	var outs [n]*os.File
	var trees [n]*Tree
	var errs [n]error
	var wg sync.WaitGroup
	for i := range n {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		outs[i] = pr
		a := Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Containment: testContainment, Stdout: pw, Stderr: os.Stderr, Restrict: restrict}
		wg.Go(func() {
			defer pw.Close()
			trees[i], errs[i] = Start(&a)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Start() error = %v", errs[i])
			continue
		}
		// The helper's few lines fit in the pipe: it exits unread.
		out, err := io.ReadAll(outs[i])
		trees[i].Wait()
		if err != nil || !strings.HasSuffix(string(out), "done\n") {
			t.Errorf("the helper printed %q (%v)", out, err)
		}
		if strings.Contains(string(out), " "+stray+"\n") {
			t.Errorf("a root holds %s:\n%s", stray, out)
		}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC != 0 {
		t.Errorf("the program's descriptor after the starts: flags %#x, %v; want close-on-exec still clear", flags, err)
	}
}

// BenchmarkSandboxStray pairs what hiding the program's stray descriptors
// costs a sandboxed start with the start itself: "start" starts, awaits
// and reaps a tree of /bin/true on a restricted (retired) thread, the
// marking included; "hide-N" marks and clears again the descriptors
// without close-on-exec with N of the benchmark's own open (besides any
// the test process inherited), which is the whole of what a start adds;
// its fds metric is how many descriptors the process held.
func BenchmarkSandboxStray(b *testing.B) {
	b.Run("start", func(b *testing.B) {
		for b.Loop() {
			a := Attr{Path: "/bin/true", Args: []string{"true"}, Containment: testContainment, Restrict: func() error { return nil }}
			tree, err := Start(&a)
			if err != nil {
				b.Fatal(err)
			}
			<-tree.Exited()
			tree.Kill()
			tree.Wait()
		}
	})
	for _, n := range []int{0, 8} {
		b.Run("hide-"+strconv.Itoa(n), func(b *testing.B) {
			for range n {
				fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Close(fd)
			}
			for b.Loop() {
				strayMu.Lock()
				restore, err := hideStray()
				if err != nil {
					b.Fatal(err)
				}
				restore()
				strayMu.Unlock()
			}
			names, _ := fdNames()
			b.ReportMetric(float64(len(names)-1), "fds")
		})
	}
}
