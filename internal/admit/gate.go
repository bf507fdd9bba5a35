package admit

import "time"

// A gate holds back the requests of one key (a backend) until a time: the
// model provider's rate limit was reached, and resets then.
type gate struct {
	key   string
	until time.Time
	// waiters wait for it to open, in the order they arrived.
	waiters list
}

// CloseGate closes the gate of key until the time until: requests that
// name key in Request.Gate wait there until then, and those of them still
// queued for the budget go back to the gate, in the order they arrived,
// losing their place in the queue (they would start only to fail). Call it
// when a run of key failed because the model provider's rate limit was
// reached and said when it resets.
//
// A gate already closed until later stays closed until then: the time is
// only ever pushed back, never brought forward (two limits of one
// provider, a per-minute and a daily one, say, reset at different times,
// and the later must be waited for). An until not after now does nothing,
// and so does the key "": requests that name no gate never see one. It is
// safe to call at any time, also with no request waiting.
func (q *Queue) CloseGate(key string, until time.Time) {
	if q == nil || key == "" {
		return
	}
	now := time.Now()
	if !until.After(now) {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.gates[key]
	switch {
	case g == nil:
		if q.gates == nil {
			q.gates = make(map[string]*gate)
		}
		g = &gate{key: key, until: until}
		q.gates[key] = g
	case until.After(g.until):
		g.until = until
		for w := g.waiters.head; w != nil; w = w.next {
			w.wake() // the time it opens changed: tell it, and re-arm its timer
		}
	default:
		return
	}
	// The requests of key queued for the budget go back behind the gate.
	var back []*waiter
	head := q.queue.head
	for w := q.queue.head; w != nil; w = w.next {
		if w.key == key {
			back = append(back, w)
		}
	}
	for _, w := range back {
		q.queue.remove(w)
		g.insert(q, w)
	}
	if len(back) > 0 && q.queue.head != head {
		q.admit() // the new head may fit where the old one did not
	}
	q.changed()
}

// closedGate returns the gate of key if it is closed at now, else nil,
// opening it if its time has come. q.mu must be held.
func (q *Queue) closedGate(key string, now time.Time) *gate {
	g := q.gates[key]
	if g == nil {
		return nil
	}
	if q.openIfDue(g, now) {
		return nil
	}
	return g
}

// openIfDue opens g if its time has come: its waiters join the queue in the
// order they arrived, and the gate is gone. It reports whether g is open
// (or gone already). q.mu must be held.
func (q *Queue) openIfDue(g *gate, now time.Time) bool {
	if q.gates[g.key] != g {
		return true // opened already
	}
	if g.until.After(now) {
		return false
	}
	delete(q.gates, g.key)
	for g.waiters.head != nil {
		w := g.waiters.popFront()
		q.gated--
		q.enqueue(w)
		w.wake()
	}
	q.admit()
	q.changed()
	return true
}

// add puts w, which has just arrived, behind the waiters of g.
func (g *gate) add(q *Queue, w *waiter) {
	w.state, w.gate = gated, g
	g.waiters.pushBack(w)
	q.gated++
}

// insert puts w, which leaves the queue, among the waiters of g in the
// order of arrival, and tells it.
func (g *gate) insert(q *Queue, w *waiter) {
	w.state, w.gate = gated, g
	g.waiters.insert(w)
	q.gated++
	w.wake()
}

// remove takes w, which gives up, from the waiters of g.
func (g *gate) remove(q *Queue, w *waiter) {
	g.waiters.remove(w)
	w.gate = nil
	q.gated--
}
