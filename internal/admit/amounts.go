package admit

import (
	"strconv"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// Amounts are quantities of the resources a Queue bounds: what a request
// needs, what is held, a Queue's capacity.
type Amounts struct {
	// Runs counts holders: a run or a session needs 1.
	Runs int64
	// Memory is bytes of memory promised: the memory limit the run will
	// be held to (internal/proc's Limits.MemoryMax).
	Memory int64
}

// Resource names one of the resources of Amounts.
type Resource int

// The resources of Amounts.
const (
	// Runs is Amounts.Runs.
	Runs Resource = iota + 1
	// Memory is Amounts.Memory.
	Memory
)

// String returns the resource's name: "runs" or "memory".
func (r Resource) String() string {
	switch r {
	case Runs:
		return "runs"
	case Memory:
		return "memory"
	}
	return "resource?"
}

// get returns the amount of r in a.
func (a Amounts) get(r Resource) int64 {
	switch r {
	case Runs:
		return a.Runs
	case Memory:
		return a.Memory
	}
	return 0
}

// add returns a+b.
func (a Amounts) add(b Amounts) Amounts {
	return Amounts{Runs: a.Runs + b.Runs, Memory: a.Memory + b.Memory}
}

// sub returns a-b.
func (a Amounts) sub(b Amounts) Amounts {
	return Amounts{Runs: a.Runs - b.Runs, Memory: a.Memory - b.Memory}
}

// negative reports whether any amount of a is below zero.
func (a Amounts) negative() bool { return a.Runs < 0 || a.Memory < 0 }

// fits reports whether need fits in capacity c with held already held: for
// each limited resource (c > 0), held+need <= c, written so that it cannot
// overflow.
func fits(c, held, need Amounts) bool {
	return (c.Runs == 0 || need.Runs <= c.Runs-held.Runs) &&
		(c.Memory == 0 || need.Memory <= c.Memory-held.Memory)
}

// format formats n of r: bytes in binary units for Memory.
func format(r Resource, n int64) string {
	if r == Memory {
		return proc.FormatBytes(n)
	}
	name := r.String()
	if n == 1 {
		name = name[:len(name)-1] // "1 run"
	}
	return strconv.FormatInt(n, 10) + " " + name
}
