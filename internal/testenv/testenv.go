// Package testenv holds what clinvoke's tests share about the machine they
// run on: how long a wait may last before a test calls it a hang.
//
// A test never waits for time to pass as a way to let something happen: it
// waits for an event. It uses a Timeout only to fail, instead of hanging,
// when the event never comes. Those bounds are generous, so that a busy or
// slow machine (a laptop on battery, a shared CI runner, go test -count=10
// beside other work) never meets them by accident, and they scale with
// CLINVOKE_TEST_TIMEOUT_SCALE (a factor, such as 3 or 0.5) for machines
// slower still, or to find hangs faster.
package testenv

import (
	"os"
	"strconv"
	"time"
)

// ScaleVar is the environment variable that scales every Timeout.
const ScaleVar = "CLINVOKE_TEST_TIMEOUT_SCALE"

// Hang is the bound of a wait for something that takes well under a second
// on an idle machine: a process starting and printing, a tree being killed.
const Hang = 2 * time.Minute

// Timeout returns d scaled by CLINVOKE_TEST_TIMEOUT_SCALE (1 when unset or
// not a positive number).
func Timeout(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv(ScaleVar), 64); err == nil && f > 0 {
		return time.Duration(float64(d) * f)
	}
	return d
}
