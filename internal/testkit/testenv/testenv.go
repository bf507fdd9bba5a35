// Package testenv holds what the tests of this module share about the machine
// they run on: how long a guard against a hang may wait, and which cgroup was
// handed to an unprivileged user.
//
// A test waits for events, not for time. Where a wait must be bounded so that a
// broken program fails the test instead of hanging it, the bound comes from
// Timeout, which is generous by default and grows with the environment variable
// CLINVOKE_TEST_TIMEOUT_SCALE on slow or busy machines.
package testenv

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// ScaleEnv names the environment variable that multiplies every Timeout: a
// positive number such as 2 or 0.5. Unset or empty means 1.
const ScaleEnv = "CLINVOKE_TEST_TIMEOUT_SCALE"

// MinTimeout is the least Timeout returns before scaling: a guard against a
// hang waits at least a minute, so that a busy machine does not trip it.
const MinTimeout = time.Minute

// Timeout returns the bound for a guard against a hang whose expected wait is
// d: max(d, MinTimeout) multiplied by Scale. It is meant for "fail instead of
// hanging forever" guards, never for behaviour defined by a timer.
func Timeout(d time.Duration) time.Duration {
	d = max(d, MinTimeout)
	s := Scale()
	if f := float64(d) * s; f < math.MaxInt64 {
		return time.Duration(f)
	}
	return time.Duration(math.MaxInt64)
}

// Scale returns the factor read from CLINVOKE_TEST_TIMEOUT_SCALE. It panics
// with a message naming the variable when the value is not a positive number,
// so that a typo does not silently shorten every guard.
func Scale() float64 {
	v := os.Getenv(ScaleEnv)
	if v == "" {
		return 1
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		panic(fmt.Sprintf("testenv: %s=%q is not a positive number; set it to a factor such as 2, or unset it", ScaleEnv, v))
	}
	return s
}

// Hang is the bound, before scaling, of a wait for something that takes
// well under a second on an idle machine: a process starting and printing,
// a tree being killed. Use it as Timeout(Hang).
const Hang = 2 * time.Minute

// CgroupParentEnv names the environment variable that hands the tests a
// cgroup v2 directory delegated to the user running them (made and chowned
// to that user by root), which the tests do not run inside: the tests of
// Options.CgroupParent check there what a host outside its cgroup parent
// gets. CI sets it for its unprivileged run; as root, the tests make such a
// cgroup themselves.
const CgroupParentEnv = "CLINVOKE_TEST_CGROUP_PARENT"
