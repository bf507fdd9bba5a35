package admit

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrTooLarge is matched by the *TooLargeError Acquire returns for a
// request that needs more than the Queue's whole capacity of a resource.
var ErrTooLarge = errors.New("admit: request larger than the whole budget")

// A TooLargeError reports a request that can never be admitted: it needs
// more of Resource than the Queue's whole capacity. Acquire returns it at
// once, holding nothing, rather than let it block the queue for good.
type TooLargeError struct {
	// Resource is the first resource (in the order of Resource) the
	// request needs more of than the capacity.
	Resource Resource
	// Need is what the request needs of it.
	Need int64
	// Capacity is the Queue's capacity of it.
	Capacity int64
}

// Error names the resource, the need and the capacity, and the fix.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("admit: a request of %s can never fit the budget of %s: lower the request's %s limit or raise the budget",
		format(e.Resource, e.Need), format(e.Resource, e.Capacity), e.Resource)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// A WaitError reports that Acquire gave up because its context was done
// before the request was admitted: nothing is held, and the Queue is as if
// the request had never been made. It wraps the context's error, so
// errors.Is(err, context.Canceled) and errors.Is(err,
// context.DeadlineExceeded) work as for the context itself.
type WaitError struct {
	// Waited is how long the request waited (0 when the context was done
	// before Acquire was called).
	Waited time.Duration
	// Ahead is how many requests were ahead of it when it gave up: in the
	// queue, or at the gate when Gate is set.
	Ahead int
	// Gate is the key of the rate-limit gate it was waiting at, or ""
	// when it was waiting for the budget.
	Gate string
	// Until is when the gate would have opened; zero when Gate is "".
	Until time.Time
	// Err is the context's error (ctx.Err(), not its cause).
	Err error
}

// Error says what the request was waiting for, how long it waited, and
// why it stopped.
func (e *WaitError) Error() string {
	var b strings.Builder
	b.WriteString("admit: ")
	switch {
	case e.Gate != "":
		fmt.Fprintf(&b, "gave up after %v waiting for the rate limit of %s to reset at %s", e.Waited, e.Gate, e.Until.UTC().Format(time.RFC3339))
	case e.Waited == 0 && e.Ahead == 0:
		b.WriteString("not admitted")
	default:
		fmt.Fprintf(&b, "gave up after %v in the queue for the budget, %d ahead", e.Waited, e.Ahead)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the context's error.
func (e *WaitError) Unwrap() error { return e.Err }
