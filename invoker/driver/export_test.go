package driver

// SetSweepCancelled turns the sweep of cancelled turns on or off, for the
// benchmark of its cost, and returns a function that restores it.
func SetSweepCancelled(on bool) (restore func()) {
	old := sweepCancelled
	sweepCancelled = on
	return func() { sweepCancelled = old }
}
