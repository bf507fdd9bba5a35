//go:build linux

package proc

import "time"

// defaultTuning is the tuning of every Tree but the tests'.
var defaultTuning = tuning{
	killTimeout:       5 * time.Second,
	lastGrace:         100 * time.Millisecond,
	signalScanTimeout: 250 * time.Millisecond,
	trackEvery:        RecordEvery,
	wedgedWait:        100 * time.Millisecond,
	rootExitWait:      100 * time.Millisecond,
	reapWait:          100 * time.Millisecond,
	maxPidfds:         256,
}
