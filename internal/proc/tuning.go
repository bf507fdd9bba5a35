package proc

import "time"

// tuning holds the bounds a Tree's Kill and tracking work with. Start
// gives each Tree defaultTuning; tests give shorter ones, and hooks,
// through Attr.tune.
type tuning struct {
	// killTimeout bounds Kill.
	killTimeout time.Duration
	// lastGrace is how long Kill waits, past its deadline, for the
	// processes it has just sent SIGKILL before it calls them survivors.
	lastGrace time.Duration
	// signalScanTimeout bounds the snapshot Signal takes before
	// signalling.
	signalScanTimeout time.Duration
	// trackEvery is how often a Tree records its members while the root
	// runs (see treeSys.track).
	trackEvery time.Duration
	// wedgedWait bounds how long a caller waits for a scan when the
	// scanner is wedged (see scanUntil).
	wedgedWait time.Duration
	// rootExitWait bounds how long Kill waits for the root to be seen
	// exited once a scan found no live member.
	rootExitWait time.Duration
	// reapWait bounds how long reap waits for a zombie to become
	// waitable.
	reapWait time.Duration
	// maxPidfds bounds the pidfds one Kill holds open at once; victims
	// beyond it are signalled through a pidfd opened for each signal.
	maxPidfds int
	// noControllers makes Start plan a tree's limits and figures as on a
	// host without cgroup controllers: no limit can be had, and figures
	// are sampled.
	noControllers bool
	// hooks, if not nil, are a test's hooks into the tree's work (Linux).
	hooks *hooks
}
