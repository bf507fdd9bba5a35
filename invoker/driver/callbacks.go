package driver

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// callbacks runs the callbacks of the caller's (OnEvent, Approve, the
// handlers of Go MCP tools) for one run and the turns it carries, and
// records the first panic (or runtime.Goexit, as from t.FailNow) of one of
// them: a bug of the caller's. The run watches done and kills its tree at
// once, no callback is called any more, and the turn that waits re-raises
// the panic on the goroutine that called Invoke or Turn once the tree is
// reaped (reraise). It is shared by the run and its conversation; its
// methods are safe for concurrent use.
type callbacks struct {
	once     sync.Once
	done     chan struct{} // closed once a callback panicked, after the fields below are written
	panicked atomic.Bool   // the same, for a look that must not block

	// Written once, before done is closed.
	val    any    // the panic's value; nil after Goexit
	goexit bool   // the callback called runtime.Goexit
	what   string // which callback: "OnEvent", "Approve", ...
	stack  []byte // where it panicked, for the log
}

func newCallbacks() *callbacks { return &callbacks{done: make(chan struct{})} }

// call runs fn, the callback of the caller's named what, and reports
// whether it returned. A panic or runtime.Goexit in fn is recorded, and
// ends the goroutine that runs it: after Goexit at once, after a panic
// once call has returned false.
func (c *callbacks) call(what string, fn func()) bool {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover() // nil when fn called runtime.Goexit
		c.record(what, p, p == nil)
	}()
	fn()
	returned = true
	return true
}

// record records the first panic (or Goexit, when goexit is set) of a
// callback; later ones are dropped.
func (c *callbacks) record(what string, p any, goexit bool) {
	c.once.Do(func() {
		c.val, c.goexit, c.what = p, goexit, what
		if !goexit {
			c.stack = debug.Stack()
		}
		c.panicked.Store(true)
		close(c.done)
	})
}

// failed reports whether a callback panicked or called Goexit.
func (c *callbacks) failed() bool { return c.panicked.Load() }

// cause says which callback panicked, once one has.
func (c *callbacks) cause() string {
	if c.goexit {
		return c.what + " called runtime.Goexit"
	}
	return fmt.Sprintf("%s panicked: %v", c.what, c.val)
}

// reraise re-raises the recorded panic (or calls Goexit) on the calling
// goroutine; it returns when no callback failed. Call it once the tree is
// reaped.
func (c *callbacks) reraise() {
	if !c.failed() {
		return
	}
	if c.goexit {
		runtime.Goexit()
	}
	panic(c.val)
}
