//go:build linux

package proc

import "time"

// Tunables; variables so that tests can shorten them.
var (
	// killTimeout bounds Kill.
	killTimeout = 5 * time.Second
	// lastGrace is how long Kill waits, past its deadline, for the
	// processes it has just sent SIGKILL before it calls them survivors.
	lastGrace = 100 * time.Millisecond
	// signalScanTimeout bounds the snapshot Signal takes before signalling.
	signalScanTimeout = 250 * time.Millisecond
	// trackEvery is how often a Tree records its members while the root
	// runs (see treeSys.track).
	trackEvery = 300 * time.Millisecond
	// wedgedWait bounds how long a caller waits for a scan when the
	// scanner is wedged (see scanUntil).
	wedgedWait = 100 * time.Millisecond
	// rootExitWait bounds how long Kill waits for the root to be seen
	// exited once a scan found no live member.
	rootExitWait = 100 * time.Millisecond
	// reapWait bounds how long reap waits for a zombie to become
	// waitable.
	reapWait = 100 * time.Millisecond
	// maxPidfds bounds the pidfds one Kill holds open at once; victims
	// beyond it are signalled through a pidfd opened for each signal.
	maxPidfds = 256
)
