package mcpadapter

import "sync"

// maxOwners is how many sessions [sessionOwners] remembers: at about a
// hundred bytes each, 10 MB at most, for a server that runs more sessions
// than any client resumes.
const maxOwners = 100_000

// sessionOwners remembers which identity (see [HTTPAccess]) ran each
// session this server has seen, so that another identity cannot resume or
// fork it: a session's history holds what its client wrote and what the
// agent read on its behalf. Sessions of calls without an identity (stdio,
// a loopback server without authentication) are not recorded, as there is
// no one to tell apart. A session the server never saw (one from before a
// restart, or the oldest past maxOwners) is taken from whoever holds its
// id, which is then the only secret guarding it.
type sessionOwners struct {
	mu    sync.Mutex
	owner map[string]string // session id → the identity that ran it
	ring  []string          // the ids in owner, oldest first from next once full
	next  int
}

// claim records identity as the owner of session sid, unless the session
// has one already or either is empty.
func (o *sessionOwners) claim(sid, identity string) {
	if sid == "" || identity == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.owner[sid]; ok {
		return
	}
	if o.owner == nil {
		o.owner = make(map[string]string)
	}
	if len(o.ring) < maxOwners {
		o.ring = append(o.ring, sid)
	} else {
		delete(o.owner, o.ring[o.next])
		o.ring[o.next] = sid
		o.next = (o.next + 1) % maxOwners
	}
	o.owner[sid] = identity
}

// check refuses a call of identity that names session sid (to resume or
// fork it) when the session was run by another identity. The refusal does
// not say whose it is.
func (o *sessionOwners) check(sid, identity string) error {
	if sid == "" {
		return nil
	}
	o.mu.Lock()
	owner, ok := o.owner[sid]
	o.mu.Unlock()
	if !ok || owner == identity {
		return nil
	}
	return refusef("session_id %q was run by another client of this server: a session is continued or forked only by the client that ran it (start a new session without session_id)", sid)
}
