package admit

import (
	"runtime"
	"sync"
	"weak"
)

// shared holds the Queues of Shared, by the weak pointer of their key. It
// is the one process-wide state of the package: a budget is shared by
// every user of one value (every Invoker made with one *invoker.Budget),
// and that value's package cannot hold machinery of its own.
var shared struct {
	mu sync.Mutex
	m  map[any]*Queue // weak.Pointer[T] → Queue
}

// Shared returns the Queue of key: the one made by newQueue at the first
// call with key, for as long as key is reachable. Every caller that holds
// the same pointer (the *invoker.Budget that several Invokers were given,
// say) shares the Queue; once key is garbage collected, the Queue is
// forgotten (grants still held release to it as usual). newQueue is called
// at most once per key, with Shared's lock held: it must not call Shared.
// A nil key returns a nil Queue, which admits everything.
//
// It costs a lock and a map lookup: call it once per user of key (when an
// Invoker is made), not once per request.
func Shared[T any](key *T, newQueue func() *Queue) *Queue {
	if key == nil {
		return nil
	}
	wp := weak.Make(key)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if q, ok := shared.m[wp]; ok {
		return q
	}
	q := newQueue()
	if shared.m == nil {
		shared.m = make(map[any]*Queue)
	}
	shared.m[wp] = q
	runtime.AddCleanup(key, forget[T], wp)
	return q
}

// forget removes the Queue of a key that was garbage collected.
func forget[T any](wp weak.Pointer[T]) {
	shared.mu.Lock()
	delete(shared.m, wp)
	shared.mu.Unlock()
}
