package admit

import (
	"runtime"
	"testing"
	"weak"
)

// TestAdmissionShared checks that the callers of one key share a Queue,
// that other keys get their own, and that a key's Queue is forgotten once
// the key is garbage collected.
func TestAdmissionShared(t *testing.T) {
	type budget struct{ memory int64 }
	a, b := &budget{1 << 30}, &budget{2 << 30}
	made := 0
	newQueue := func(k *budget) func() *Queue {
		return func() *Queue { made++; return New(Amounts{Memory: k.memory}) }
	}
	qa := Shared(a, newQueue(a))
	if Shared(a, newQueue(a)) != qa || made != 1 {
		t.Errorf("two calls with one key: %d Queues made, want 1 shared", made)
	}
	if qb := Shared(b, newQueue(b)); qb == qa || qb.Capacity().Memory != 2<<30 {
		t.Error("another key shares the first key's Queue")
	}
	if Shared[budget](nil, nil) != nil {
		t.Error("a nil key has a Queue")
	}
	keys := []any{weak.Make(a), weak.Make(b)}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)

	// Once the keys are unreachable, their Queues are forgotten. Cleanups
	// run on a goroutine of the runtime after a collection: collect until
	// they have run.
	for i := 0; ; i++ {
		runtime.GC()
		n := 0
		shared.mu.Lock()
		for _, k := range keys {
			if _, ok := shared.m[k]; ok {
				n++
			}
		}
		shared.mu.Unlock()
		if n == 0 {
			break
		}
		if i == 1000 {
			t.Fatalf("%d Queues still held after their keys were collected", n)
		}
		runtime.Gosched()
	}
}
