package driver

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/clinvoke/clinvoke/invoker"
)

// The callbacks of the caller's (OnEvent, Approve, Go tool handlers): a
// panic or runtime.Goexit in one is a bug of the caller's. It is recorded
// once, the tree is killed at once, and the panic is re-raised on the
// goroutine that called Invoke or Turn once the tree is reaped.

func (r *run) callOnEvent(ev invoker.Event) { r.call("OnEvent", func() { r.onEvent(ev) }) }

// call runs fn, a callback of the caller's named what (OnEvent, Approve),
// and reports whether it returned. A panic or runtime.Goexit in it is
// recorded (see recordPanic) and ends the goroutine that runs it: after
// Goexit at once, after a panic once call has returned false.
func (r *run) call(what string, fn func()) bool {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover() // nil when fn called runtime.Goexit
		r.recordPanic(what, p, p == nil)
		// After a panic this goroutine goes on without calling back;
		// after Goexit it ends here and the kill stops the CLI.
	}()
	fn()
	returned = true
	return true
}

// panicCause says which callback panicked, once one has.
func (r *run) panicCause() string {
	if r.goexit {
		return r.panicWhat + " called runtime.Goexit"
	}
	return fmt.Sprintf("%s panicked: %v", r.panicWhat, r.panicVal)
}

// recordPanic records the first panic (or runtime.Goexit, when goexit is
// set) of a callback of the caller's, a bug of the caller's: the ladder
// kills the tree at once, no further event is delivered, and reraise
// re-raises it on the goroutine that called Invoke or Turn.
func (r *run) recordPanic(what string, p any, goexit bool) {
	r.panicOnce.Do(func() {
		r.panicVal, r.goexit, r.panicWhat = p, goexit, what
		if !goexit {
			r.log.Error(what+" panicked", "panic", p, "stack", string(debug.Stack()))
		}
		r.panicked.Store(true)
		close(r.panicCh)
	})
}

// reraise hands a panic (or runtime.Goexit, as from t.FailNow) of OnEvent
// back to the goroutine that called Invoke or Turn, once the tree is
// reaped; it returns when OnEvent did neither.
func (r *run) reraise() {
	if !r.panicked.Load() {
		return
	}
	if r.goexit {
		runtime.Goexit()
	}
	panic(r.panicVal)
}
