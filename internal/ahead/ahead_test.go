package ahead

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a Pool of numbered things that records what it made and
// released.
type rig struct {
	mu       sync.Mutex
	made     int
	released []int
	refuse   bool          // Check refuses every thing
	refuseN  int           // Check refuses this many things, then takes
	fail     error         // Make's error
	gate     chan struct{} // if not nil, a filling Make waits on it
	p        *Pool[int]
}

func newRig(t *testing.T, size int, idle time.Duration) *rig {
	r := &rig{}
	r.p = New(Config[int]{
		Size: size,
		Idle: idle,
		Make: r.make,
		Check: func(int) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.refuseN > 0 {
				r.refuseN--
				return false
			}
			return !r.refuse
		},
		Release: func(n int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.released = append(r.released, n)
		},
		Go: func(f func()) {
			go func() {
				r.mu.Lock()
				gate := r.gate
				r.mu.Unlock()
				if gate != nil {
					<-gate
				}
				f()
			}()
		},
	})
	t.Cleanup(func() {
		r.p.Close()
		if len(r.p.Kept()) != 0 {
			t.Errorf("Close left %v kept", r.p.Kept())
		}
	})
	return r
}

func (r *rig) make() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.made++
	return r.made, nil
}

// follow has the pool count two runs, so that Fill makes.
func (r *rig) follow(t *testing.T) {
	t.Helper()
	for range 2 {
		if n, ok := r.p.Take(); ok {
			t.Fatalf("Take() = %d from a pool that kept nothing", n)
		}
	}
}

// filled is Fill, waited for.
func (r *rig) filled() []int {
	r.p.Fill()
	r.p.Wait()
	return r.p.Kept()
}

func (r *rig) counts() (made int, released []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.made, slices.Clone(r.released)
}

// TestPoolOnceRunsFollow: a process's first run has nothing made ahead
// (a one-run program makes nothing); from the second on, Fill makes
// Size things; a full pool makes no more.
func TestPoolOnceRunsFollow(t *testing.T) {
	for _, size := range []int{1, 2} {
		r := newRig(t, size, 0)
		r.p.Take()
		if kept := r.filled(); len(kept) != 0 {
			t.Errorf("size %d, first run: kept %v, want nothing", size, kept)
		}
		if made, _ := r.counts(); made != 0 {
			t.Errorf("size %d, first run: %d made, want none", size, made)
		}
		r.p.Take()
		if kept := r.filled(); len(kept) != size {
			t.Errorf("size %d, second run: kept %v, want %d", size, kept, size)
		}
		r.filled()
		if made, _ := r.counts(); made != size {
			t.Errorf("size %d: %d made after Fill on a full pool, want %d", size, made, size)
		}
	}
}

// TestPoolTake: a kept thing Check finds fit is taken, once; one it
// refuses is released and Get makes a fresh one on its caller.
func TestPoolTake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
		get    bool
	}{
		{"Take, fit", false, false},
		{"Take, refused", true, false},
		{"Get, fit", false, true},
		{"Get, refused", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, 0)
			r.follow(t)
			kept := r.filled()
			r.mu.Lock()
			r.refuse = tc.refuse
			r.mu.Unlock()
			var got int
			var ok bool
			if tc.get {
				var err error
				got, err = r.p.Get()
				ok = err == nil
			} else {
				got, ok = r.p.Take()
			}
			made, released := r.counts()
			switch {
			case !tc.refuse:
				if !ok || got != kept[0] || len(released) != 0 {
					t.Errorf("got %d, %v, released %v; want the kept %d, none released", got, ok, released, kept[0])
				}
			case tc.get:
				if !ok || got == kept[0] || made != 2 || !slices.Equal(released, kept) {
					t.Errorf("got %d, %v, %d made, released %v; want a fresh one, the kept %v released", got, ok, made, released, kept)
				}
			default:
				if ok || !slices.Equal(released, kept) {
					t.Errorf("got %d, %v, released %v; want nothing, the kept %v released", got, ok, released, kept)
				}
			}
			if again, ok := r.p.Take(); ok {
				t.Errorf("a second Take() = %d, want nothing kept", again)
			}
		})
	}
}

// TestPoolIdle: the idle timer's function releases what is kept, unless
// the pool was used since the timer fired (then the reset timer fires
// again) or Settle stopped it.
func TestPoolIdle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(p *Pool[int])
		drained bool
	}{
		{"idle", func(*Pool[int]) {}, true},
		{"taken from since", func(p *Pool[int]) { p.Take() }, false},
		{"filled since", func(p *Pool[int]) { p.Fill(); p.Wait() }, false},
		{"settled since", func(p *Pool[int]) { p.Settle() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const idle = time.Hour
			r := newRig(t, 2, idle)
			r.follow(t)
			kept := r.filled()
			r.p.mu.Lock()
			r.p.last = time.Now().Add(-idle) // the timer fires now
			r.p.mu.Unlock()
			tc.between(r.p)
			before := r.p.Kept()
			r.p.idled()
			after := r.p.Kept()
			if drained := len(before) > 0 && len(after) == 0; drained != tc.drained {
				t.Errorf("kept %v, before the timer %v, after %v: drained %v, want %v", kept, before, after, drained, tc.drained)
			}
			if _, released := r.counts(); tc.drained && !slices.Equal(released, before) {
				t.Errorf("released %v, want %v", released, before)
			}
		})
	}
}

// TestPoolIdleTimer: once the idle time has passed with no use, the
// timer releases what is kept.
func TestPoolIdleTimer(t *testing.T) {
	r := newRig(t, 1, time.Millisecond)
	released := make(chan int, 1)
	r.p.cfg.Release = func(n int) { released <- n }
	r.follow(t)
	kept := r.filled()
	select {
	case n := <-released:
		if len(kept) != 1 || n != kept[0] {
			t.Errorf("released %d, kept %v", n, kept)
		}
	case <-time.After(time.Minute):
		t.Fatalf("kept %v not released a minute after a millisecond's idle time", kept)
	}
	if kept := r.p.Kept(); len(kept) != 0 {
		t.Errorf("kept %v after the idle release", kept)
	}
}

// TestPoolFillStopped: a fill the pool is drained during releases what
// it makes; one whose Make fails keeps nothing, and Get returns Make's
// error; either way a later Fill makes again.
func TestPoolFillStopped(t *testing.T) {
	errNo := errors.New("no")
	for _, tc := range []struct {
		name   string
		size   int
		stop   func(t *testing.T, r *rig) // a Fill that keeps nothing
		resume func(r *rig)               // under r.mu
	}{
		{"drained while making", 1, func(t *testing.T, r *rig) {
			gate := make(chan struct{})
			r.gate = gate
			r.p.Fill()
			r.p.Drain()
			close(gate)
			r.p.Wait()
			if made, released := r.counts(); made != 1 || !slices.Equal(released, []int{1}) {
				t.Errorf("%d made, released %v; want the one made released", made, released)
			}
		}, func(r *rig) { r.gate = nil }},
		{"Make fails", 2, func(t *testing.T, r *rig) {
			r.fail = errNo
			r.filled()
			if _, err := r.p.Get(); !errors.Is(err, errNo) {
				t.Errorf("Get() error = %v, want Make's", err)
			}
		}, func(r *rig) { r.fail = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.size, 0)
			r.follow(t)
			tc.stop(t, r)
			if kept := r.p.Kept(); len(kept) != 0 {
				t.Errorf("kept %v from a stopped fill", kept)
			}
			r.mu.Lock()
			tc.resume(r)
			r.mu.Unlock()
			if kept := r.filled(); len(kept) != tc.size {
				t.Errorf("a later Fill kept %v, want %d", kept, tc.size)
			}
		})
	}
}

// TestPoolConcurrentTakes: with takes and fills at once, each thing made
// goes to one taker only, or stays kept: none is given twice or lost.
func TestPoolConcurrentTakes(t *testing.T) {
	const size, takers = 2, 8
	r := newRig(t, size, time.Hour)
	r.follow(t)
	r.filled()
	got := make(chan int, takers)
	var wg sync.WaitGroup
	for range takers {
		wg.Go(func() {
			if n, ok := r.p.Take(); ok {
				got <- n
			}
			r.p.Fill()
		})
	}
	wg.Wait()
	r.p.Wait()
	close(got)
	all := r.p.Kept()
	taken := 0
	for n := range got {
		all = append(all, n)
		taken++
	}
	made, released := r.counts()
	all = append(all, released...)
	slices.Sort(all)
	if taken < size || len(all) != made || len(slices.Compact(all)) != made {
		t.Errorf("%d taken, %d made; taken, kept and released: %v; want each made once", taken, made, all)
	}
}

// TestPoolCloseSettle: Settle and Close leave nothing kept, everything
// made either taken or released; after Close, Fill makes nothing and Get
// makes on its caller; SettleAll settles the pools not closed, and runs
// what OnSettle was given.
func TestPoolCloseSettle(t *testing.T) {
	a, b := newRig(t, 2, time.Hour), newRig(t, 1, time.Hour)
	for _, r := range []*rig{a, b} {
		r.follow(t)
		r.filled()
	}
	b.p.Close()
	onSettle := 0
	OnSettle(func() { onSettle++ })
	SettleAll()
	if onSettle != 1 {
		t.Errorf("SettleAll ran a function given to OnSettle %d times; want once", onSettle)
	}
	for name, r := range map[string]*rig{"settled": a, "closed": b} {
		made, released := r.counts()
		if kept := r.p.Kept(); len(kept) != 0 || len(released) != made {
			t.Errorf("%s: kept %v, %d made, released %v; want all released", name, kept, made, released)
		}
		r.p.mu.Lock()
		idle := r.p.idle
		r.p.mu.Unlock()
		if idle != nil {
			t.Errorf("%s: the idle timer is still set", name)
		}
	}
	if kept := a.filled(); len(kept) != 2 {
		t.Errorf("a settled pool's Fill kept %v, want two", kept)
	}
	if kept := b.filled(); len(kept) != 0 {
		t.Errorf("a closed pool's Fill kept %v, want nothing", kept)
	}
	if n, err := b.p.Get(); err != nil || n == 0 {
		t.Errorf("a closed pool's Get() = %d, %v; want one made", n, err)
	}
	pools.mu.Lock()
	_, listed := pools.all[b.p]
	pools.mu.Unlock()
	if listed {
		t.Error("a closed pool is still settled by SettleAll")
	}
}

// TestPoolTakeRefusedOne: where Check refuses one kept thing and another
// is kept, Take releases the refused one and returns the other, so that
// Get makes nothing on its caller.
func TestPoolTakeRefusedOne(t *testing.T) {
	r := newRig(t, 2, 0)
	r.follow(t)
	kept := r.filled()
	if len(kept) != 2 {
		t.Fatalf("kept %v, want 2", kept)
	}
	r.mu.Lock()
	r.refuseN = 1
	r.mu.Unlock()
	got, err := r.p.Get()
	made, released := r.counts()
	if err != nil || got != kept[0] || made != 2 || !slices.Equal(released, kept[1:]) {
		t.Errorf("Get() = %d, %v, %d made, released %v; want the kept %d, none made, the refused %d released",
			got, err, made, released, kept[0], kept[1])
	}
}

// TestPoolSettleWaitsRelease: Settle returns only once a Drain releasing
// things on another goroutine (the idle timer's) has released them all.
func TestPoolSettleWaitsRelease(t *testing.T) {
	entered, gate := make(chan struct{}), make(chan struct{})
	var releasedAll, settledFirst atomic.Bool
	var settled atomic.Bool
	p := New(Config[int]{
		Make: func() (int, error) { return 1, nil },
		Release: func(int) {
			close(entered)
			<-gate
			settledFirst.Store(settled.Load())
			releasedAll.Store(true)
		},
	})
	defer p.Close()
	p.Take()
	p.Take()
	p.Fill()
	p.Wait()
	drained := make(chan struct{})
	go func() { defer close(drained); p.Drain() }()
	<-entered
	var open sync.Once
	openGate := func() { open.Do(func() { close(gate) }) }
	testHookSettleWait = openGate
	defer func() { testHookSettleWait = nil }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Settle()
		settled.Store(true)
	}()
	select {
	case <-done:
		if !releasedAll.Load() {
			t.Errorf("Settle returned while a Drain was releasing")
		}
		openGate()
	case <-drained:
		<-done
	}
	<-drained
	if settledFirst.Load() {
		t.Errorf("the release ended after Settle had returned")
	}
}

// TestPoolGoRunsNow: a Config.Go that runs the filling function before
// it returns is allowed (Fill does not hold the pool's lock around it).
func TestPoolGoRunsNow(t *testing.T) {
	p := New(Config[int]{
		Size:    2,
		Make:    func() (int, error) { return 1, nil },
		Release: func(int) {},
		Go:      func(f func()) { f() },
	})
	defer p.Close()
	p.Take()
	p.Take()
	p.Fill()
	if got := len(p.Kept()); got != 2 {
		t.Errorf("kept %d after a Fill whose Go ran at once, want 2", got)
	}
}

// TestNewRequired: New refuses a Config without Make or Release.
func TestNewRequired(t *testing.T) {
	for _, cfg := range []Config[int]{
		{Release: func(int) {}},
		{Make: func() (int, error) { return 0, nil }},
	} {
		func() {
			defer func() {
				if v, _ := recover().(string); !strings.HasPrefix(v, "ahead: ") {
					t.Errorf("New(%+v) panicked with %q, want a panic naming ahead", cfg, v)
				}
			}()
			New(cfg)
		}()
	}
}
