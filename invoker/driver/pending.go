package driver

import (
	"slices"
	"sync"
)

// maxPending bounds what waits for its warning in a pending queue: past
// it, more is dropped until a turn delivers the ones held.
const maxPending = 1000

// pending is a bounded queue of what a run's turn is to warn of: filled
// from any goroutine (a connection's, a lookup's), taken by the turn that
// delivers the warnings. What the bound drops is counted. The zero
// pending is empty and ready to use.
type pending[T any] struct {
	mu      sync.Mutex
	items   []T
	dropped int // added past maxPending since the last take
}

// add queues v and reports whether it did: not when maxPending are
// already waiting, in which case it counts v dropped.
func (p *pending[T]) add(v T) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.items) >= maxPending {
		p.dropped++
		return false
	}
	p.items = append(p.items, v)
	return true
}

// take returns what is queued, in order, and how many were dropped since
// the last take, and empties the queue.
func (p *pending[T]) take() (items []T, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	items, dropped = p.items, p.dropped
	p.items, p.dropped = nil, 0
	return items, dropped
}

// peek returns a copy of what is queued, leaving it queued.
func (p *pending[T]) peek() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.items)
}
