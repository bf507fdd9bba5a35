//go:build !linux && !darwin && !windows

package proc

import (
	"errors"
	"runtime"
)

// treeSys is empty: Start never returns a Tree here.
type treeSys struct{}

// errUnsupported is returned by Start on systems without a process-tree
// implementation.
var errUnsupported = errors.New("proc: process trees are not supported on " + runtime.GOOS)

func start(*Attr) (*Tree, error) { return nil, errUnsupported }

func (t *Tree) signal(Signal) error { return errUnsupported }

func (t *Tree) snapshot() {}

func (t *Tree) kill() Report { return Report{} }

func (t *Tree) wait() (State, error) { return State{}, errUnsupported }

func probe(want Containment, _ string) (Containment, error) { return Auto, errUnsupported }

func (t *Tree) baseline(*Baseline) {}

func (t *Tree) sweepSince(Baseline) Report { return Report{} }
