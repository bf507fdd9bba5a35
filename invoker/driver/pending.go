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
// delivers the warnings. The zero pending is empty and ready to use.
type pending[T any] struct {
	mu    sync.Mutex
	items []T
}

// add queues v, unless maxPending are already waiting.
func (p *pending[T]) add(v T) {
	p.mu.Lock()
	if len(p.items) < maxPending {
		p.items = append(p.items, v)
	}
	p.mu.Unlock()
}

// take returns what is queued, in order, and empties the queue.
func (p *pending[T]) take() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.items
	p.items = nil
	return items
}

// peek returns a copy of what is queued, leaving it queued.
func (p *pending[T]) peek() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.items)
}
