//go:build !linux

package proc

import (
	"errors"
	"runtime"
)

// Limits and usage where cgroups do not exist: no limit can be enforced
// (a Windows Job Object could hold some; not done yet), and Usage is
// empty.

// limitsSupported rejects any limit: no controller holds trees here.
func limitsSupported(a *Attr) error {
	var err error
	a.Limits.each(func(r Resource) {
		if err == nil {
			err = unavailableHere(r)
		}
	})
	return err
}

// unavailableHere is the error of a limit on r on this system.
func unavailableHere(r Resource) error {
	return &LimitUnavailableError{Resource: r, Reason: "cgroups exist only on Linux, not on " + runtime.GOOS}
}

func probeLimits(Containment, string) Support {
	return Support{
		Memory: unavailableHere(Memory), MemoryHigh: unavailableHere(MemoryHigh),
		Tasks: unavailableHere(Tasks), CPU: unavailableHere(CPU),
		HostMemory: unavailableHere(Memory),
		Where:      "no cgroups on " + runtime.GOOS,
	}
}

func setHostLimits(_ string, l Limits) error {
	if l.MemoryMax != 0 {
		return unavailableHere(Memory)
	}
	if l.Tasks != 0 {
		return unavailableHere(Tasks)
	}
	return nil
}

func delegateOwnCgroup() error {
	return errors.New("proc: cgroups exist only on Linux, not on " + runtime.GOOS)
}

func (t *Tree) usage() Usage { return Usage{} }

func (t *Tree) counts() Usage { return Usage{} }

func (t *Tree) mark() Mark { return Mark{tree: t} }

func (t *Tree) since(Mark) Usage { return Usage{} }

func (t *Tree) noteKill() {}
