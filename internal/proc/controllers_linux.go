//go:build linux

package proc

import (
	"bytes"
	"path/filepath"
	"strings"
)

// Cgroup v2 controllers. A tree's cgroup rN gets the memory, pids and cpu
// controllers when its home enables them in cgroup.subtree_control, which
// cgroup v2 allows only when the home's parent enables them too, and the
// parent can only if it holds no process (the "no internal processes"
// rule; the root cgroup is exempt). The home never holds a process, so
// what matters is the parent:
//
//   - Attr.CgroupParent naming an empty cgroup the host may write (made by
//     root, or delegated by systemd): the controllers its own parent gives
//     it are enabled in it, then in the home.
//   - The default parent, the host's own cgroup, holds the host: its
//     controllers are used only if they are already enabled (the root
//     cgroup, or a cgroup namespace's root as root), or after
//     DelegateOwnCgroup moved the host into a leaf. The host's cgroup is
//     never changed otherwise.
//
// Every file is written and read through a directory, so that the tests
// lay out a fake cgroupfs in a temporary directory and check which files
// are written with which values.

// ctlSet is a set of cgroup v2 controllers.
type ctlSet uint8

const (
	ctlMemory ctlSet = 1 << iota
	ctlPids
	ctlCPU

	ctlWanted = ctlMemory | ctlPids | ctlCPU
)

var ctlNames = []struct {
	c    ctlSet
	name string
}{{ctlMemory, "memory"}, {ctlPids, "pids"}, {ctlCPU, "cpu"}}

// String lists the controllers, such as "memory pids cpu".
func (s ctlSet) String() string {
	var names []string
	for _, n := range ctlNames {
		if s&n.c != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " ")
}

// parseControllers parses a cgroup.controllers or cgroup.subtree_control
// file.
func parseControllers(b []byte) ctlSet {
	var s ctlSet
	for f := range bytes.FieldsSeq(b) {
		for _, n := range ctlNames {
			if string(f) == n.name {
				s |= n.c
			}
		}
	}
	return s
}

// readControllers reads the controllers of a cgroup.controllers or
// cgroup.subtree_control file (none if it cannot be read).
func readControllers(path string) ctlSet {
	b, err := readSmall(path, unheld)
	if err != nil {
		return 0
	}
	return parseControllers(b)
}

// enableControllers enables in dir's cgroup.subtree_control the wanted
// controllers that dir has (cgroup.controllers) and has not enabled yet,
// and returns those enabled for dir's children afterwards.
func enableControllers(dir string, want ctlSet) (ctlSet, error) {
	have := readControllers(filepath.Join(dir, "cgroup.controllers"))
	on := readControllers(filepath.Join(dir, "cgroup.subtree_control"))
	add := want & have &^ on
	if add == 0 {
		return on & want, nil
	}
	var b strings.Builder
	for _, n := range ctlNames {
		if add&n.c != 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("+" + n.name)
		}
	}
	err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), b.String())
	if err == nil {
		return (on | add) & want, nil
	}
	// One refused controller fails the whole write: try each alone.
	for _, n := range ctlNames {
		if add&n.c != 0 && writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+n.name) == nil {
			on |= n.c
		}
	}
	return on & want, err
}

// setUpControllers gives the home's trees the wanted controllers it can:
// first in parent, when the caller named it (explicit), then in the home.
// It returns the controllers the trees' cgroups get, and sets the home's
// memory.oom.group to 0, so that an OOM kill under the home's limit takes
// one process, not every tree (a new cgroup's default, set in case the
// home was made otherwise).
func setUpControllers(parent, home string, explicit bool) ctlSet {
	if explicit {
		enableControllers(parent, ctlWanted) // fails harmlessly if parent holds processes
	}
	on, _ := enableControllers(home, ctlWanted)
	if on&ctlMemory != 0 {
		writeFile(filepath.Join(home, "memory.oom.group"), "0")
	}
	return on
}

// applyV2 writes, in the tree's v2 cgroup dir, the limits of l whose
// controllers ctl holds, before the root starts. A fresh cgroup's limits
// are all "max": only the limits set are written.
func applyV2(dir string, l Limits, ctl ctlSet) error {
	for _, c := range controllers {
		if ctl&c.places()[0].v2 != 0 {
			if err := c.applyV2(dir, l); err != nil {
				return err
			}
		}
	}
	return nil
}
