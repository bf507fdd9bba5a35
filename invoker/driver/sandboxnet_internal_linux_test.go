package driver

import (
	"io"
	"os"
	"testing"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/internal/proc"
)

// TestSandboxNetWrapExtraFiles: a run started by Wrap that passes files
// of its own (proc.Attr.ExtraFiles) keeps them at descriptors 3 and up,
// and the first stage finds its socket after them: the namespace is set
// up, and the CLI writes to the caller's descriptor 3.
func TestSandboxNetWrapExtraFiles(t *testing.T) {
	if err := egress.ProbeWrap(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("egress.ProbeWrap() = %v: CI allows unprivileged user namespaces", err)
		}
		t.Skipf("no user namespaces here: %v", err)
	}
	n, err := egress.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rn := &runNet{n: n, wrap: true}
	attr := &proc.Attr{Path: "/bin/sh", Args: []string{"sh", "-c", "echo mine >&3"}, ExtraFiles: []*os.File{w}}
	if err := rn.wrapAttr(attr, nil); err != nil {
		w.Close()
		t.Fatal(err)
	}
	tree, err := proc.Start(attr)
	w.Close()
	if err != nil {
		t.Fatalf("proc.Start() = %v", err)
	}
	serr := n.Started()
	got, rerr := io.ReadAll(r)
	if rep := tree.Kill(); len(rep.Survivors) > 0 {
		t.Errorf("survivors: %v", rep.Survivors)
	}
	st, werr := tree.Wait()
	if serr != nil {
		t.Fatalf("Started() = %v, want the first stage to find its socket after the caller's files", serr)
	}
	if werr != nil || st.Code != 0 || rerr != nil || string(got) != "mine\n" {
		t.Errorf("the CLI wrote %q (%v) to descriptor 3 and exited %+v (%v), want \"mine\\n\" and 0", got, rerr, st, werr)
	}
}
