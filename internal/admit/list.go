package admit

// A list is a FIFO of waiters, linked through the waiters themselves: the
// queue for the budget, and each gate's waiters. Every waiter's pos is its
// index in the list it is in, kept by renumber after each change.
type list struct {
	head, tail *waiter
	n          int
}

// pushBack appends w.
func (l *list) pushBack(w *waiter) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	w.pos = l.n
	l.n++
}

// insert puts w before the first waiter that arrived after it (by
// ticket), and renumbers from w.
func (l *list) insert(w *waiter) {
	at := l.head
	for at != nil && at.ticket < w.ticket {
		at = at.next
	}
	if at == nil {
		l.pushBack(w)
		return
	}
	w.next, w.prev = at, at.prev
	if at.prev != nil {
		at.prev.next = w
	} else {
		l.head = w
	}
	at.prev = w
	l.n++
	pos := 0
	if w.prev != nil {
		pos = w.prev.pos + 1
	}
	renumber(w, pos)
}

// remove unlinks w and renumbers the waiters that were behind it.
func (l *list) remove(w *waiter) {
	next, pos := w.next, w.pos
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.n--
	renumber(next, pos)
}

// renumber gives the waiters from w on their positions, counting from pos,
// and tells each one whose position changed and that watches it.
func renumber(w *waiter, pos int) {
	for ; w != nil; w, pos = w.next, pos+1 {
		if w.pos != pos {
			w.pos = pos
			if w.watch {
				w.wake()
			}
		}
	}
}

// popFront unlinks the head without renumbering: the caller renumbers
// once after taking several.
func (l *list) popFront() *waiter {
	w := l.head
	l.head = w.next
	if l.head != nil {
		l.head.prev = nil
	} else {
		l.tail = nil
	}
	w.next = nil
	l.n--
	return w
}
