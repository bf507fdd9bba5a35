package driver

import (
	"io"
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
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

// TestSandboxNetEnterDropsCaps: as root, the thread that forks a run by
// Enter's route (the network namespace joined, then the ceiling, if any)
// ends with none of the network capabilities nor those that reach past
// the ceiling, in its effective, permitted and bounding sets alike,
// whether a filesystem ceiling restricts it or not; root keeps the rest
// (CAP_DAC_OVERRIDE, effective and permitted).
func TestSandboxNetEnterDropsCaps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a user's run takes Wrap's route")
	}
	if err := egress.Probe(); err != nil {
		t.Skipf("no network namespace here: %v", err)
	}
	for _, ceiling := range []bool{false, true} {
		t.Run(map[bool]string{false: "no ceiling", true: "ceiling"}[ceiling], func(t *testing.T) {
			var rules *sandbox.Ruleset
			if ceiling {
				if _, err := sandbox.Probe(); err != nil {
					t.Skipf("no Landlock here: %v", err)
				}
				work := t.TempDir()
				var err error
				if rules, err = sandbox.Build(sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: work}); err != nil {
					t.Fatal(err)
				}
				defer rules.Close()
			}
			n, err := egress.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			restrict := (&runNet{n: n}).enterRestrict(rules)
			var status []byte
			if err := sandbox.Retired(func() error {
				if err := restrict(); err != nil {
					return err
				}
				status, err = os.ReadFile("/proc/thread-self/status")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			stagetest.CheckCaps(t, string(status), slices.Concat(sandbox.EscapeCaps, egress.NetCaps), unix.CAP_DAC_OVERRIDE)
		})
	}
}
