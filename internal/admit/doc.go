// Package admit decides when a run may start on a host shared by many: it
// admits requests to a budget of runs and memory, first come first
// served, and holds back the runs of a backend whose model provider said it
// is rate limited until the limit resets.
//
// A [Queue] has a capacity for each resource ([Amounts]: runs at once,
// bytes of memory promised); zero means no limit on that
// resource. A request names what it needs, usually one run and the limits
// the run will be held to. It fits when, for every limited resource, what
// is held now plus what it needs is at most the capacity: the Queue counts
// promises, not use. Holding a run to its promise is the kernel's job
// (internal/proc's Limits on the run, and HoldHostMemory on the cgroup
// that holds every run, so that runs that under-declare cannot exceed the
// sum together); the Queue only keeps the promises within the budget.
//
// # Order
//
// Requests are admitted in the order they arrived. A request at the head
// of the queue that does not fit holds back every request behind it, even
// those that would fit. That is a choice, the one
// golang.org/x/sync/semaphore makes: under a steady flow of small requests
// (runs of 200 MiB) a large one (a run of 4 GiB) that let them pass would
// never find room, as there is always room for one more small one. The
// price is that room can sit unused while the head waits for more to be
// released. A request that can never fit, because it needs more of a
// resource than the whole capacity, is refused at once with a
// *[TooLargeError] rather than left to block the queue for good.
//
// # Holding
//
// [Queue.Acquire] returns a *[Grant] once the request fits and is at the
// head, or an error and nothing held. The holder must call
// [Grant.Release] when it is done, exactly when the resources are free
// again: after a run's process tree has been reaped, after a session's
// Close. A grant may be held for as long as it takes (a session holds
// one until it is closed); a grant never released keeps its share of the
// budget for the life of the Queue. Release wakes the waiters that now
// fit, in order.
//
// A wait ends when the request is admitted or when its context is done:
// Acquire then returns a *[WaitError] that wraps the context's error
// (errors.Is(err, context.Canceled) holds) and leaves the Queue as if the
// request had never been made.
//
// # Visibility
//
// A waiting request learns where it stands through [Request.OnWait],
// called on the goroutine that called Acquire when the wait starts and
// again whenever its position (or, at a rate-limit gate, the time the
// gate opens) changes. The Queue never waits for it: a change only marks
// the waiter, whose own goroutine reads its latest position and calls
// OnWait, so a slow OnWait delays nobody else, and positions that change
// faster than it returns are skipped, the latest being reported. The time
// waited is [Grant.Waited]; [Queue.Stats] gives the Queue's counters and
// gauges at any time (the metrics recorded come from the waits
// themselves, see [Instruments]).
//
// # Rate limits
//
// [Queue.CloseGate] closes the gate of a key, such as a backend's name,
// until a time: when a run fails because the model provider's rate limit
// was reached and the CLI said when the limit resets. A request that names
// the key ([Request.Gate]) waits at the closed gate until then, cancellable
// and visible like a wait for the budget, before it joins the queue; a
// request that names no key never looks at a gate. Requests of the key
// that were still queued for the budget when the gate closed go back to
// the gate, since they would start only to fail. When the gate opens, its
// waiters join the queue in the order they arrived.
//
// # Cost
//
// A Queue is safe for concurrent use, and takes no goroutine of its own:
// a waiting request waits on its caller's goroutine, with a timer while it
// waits at a gate. An Acquire that fits at once costs a lock, a few
// comparisons and one small allocation (the Grant); see BenchmarkAdmission.
// A change of the queue (an admission, a cancel) costs time in proportion
// to the number of requests behind it, each of which is told its new
// position.
package admit
