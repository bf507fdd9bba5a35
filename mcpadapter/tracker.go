package mcpadapter

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callKeyHeader is the request header with which [Tracker.Handler] tells
// the tool handlers which HTTP request carried their call. The SDK hands
// the headers of that request to the handler (RequestExtra.Header); it
// does not hand over the request's context. The Handler overwrites any
// value a client sends, so a client cannot name another's request.
const callKeyHeader = "Clinvoke-Call-Key"

// sessionIDHeader is the header of the streamable HTTP transport that
// names a session.
const sessionIDHeader = "Mcp-Session-Id"

// A Tracker follows the calls in progress of the tools registered with it
// (Options.Tracker). A server uses it for two things the SDK does not do:
//
//   - Wait, at shutdown, until every call has ended: its run's process tree
//     reaped and its transcript line and log record written. A call stops
//     counting only then, so a server that exits once Wait returns loses no
//     record. Wait also waits until every warm session
//     (Options.WarmSessions) is closed and its process tree reaped.
//   - Over streamable HTTP, cancel a call whose client went away: wrap the
//     SDK's handler with Handler.
//
// The zero Tracker is ready to use. A Tracker is safe for concurrent use;
// it may serve the tools of one Register call only.
type Tracker struct {
	mu    sync.Mutex
	n     int           // calls in progress
	held  int           // warm sessions alive
	idle  chan struct{} // closed when n+held drops to 0; nil while it is 0
	byKey map[string]map[*trackedCall]struct{}
}

type trackedCall struct {
	cancel context.CancelCauseFunc
}

// Active returns the number of calls in progress.
func (tr *Tracker) Active() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.n
}

// Wait returns nil once no call is in progress and no warm session is
// alive, or ctx's error if ctx is done first. Calls that start while Wait
// waits count too: to wait for the last call, first make calls stop
// arriving (Options.Context refuses them once done, and closes the warm
// sessions).
func (tr *Tracker) Wait(ctx context.Context) error {
	for {
		tr.mu.Lock()
		if tr.n+tr.held == 0 {
			tr.mu.Unlock()
			return nil
		}
		idle := tr.idle
		tr.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Handler returns h (the SDK's streamable HTTP handler) wrapped so that a
// tool call is cancelled, with ErrClientGone as the cause, when the HTTP
// request that carried it ends before the call is answered: the client
// disconnected or closed its stream, its session was deleted (DELETE) or
// closed for being idle (StreamableHTTPOptions.SessionTimeout). Its run's
// process tree is killed and the call recorded as cancelled.
//
// go-sdk v1.8.0 does none of this for the protocol versions clients use
// today: it lets a call whose stream dropped run to its end (nobody can
// read its answer without an event store), and closing a session waits
// for the calls in flight instead of cancelling them.
func (tr *Tracker) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get(sessionIDHeader); r.Method == http.MethodDelete && sid != "" {
			// The SDK's DELETE closes the session, which waits for the
			// calls in flight, whose requests end only once the session
			// is closed: cancel them first.
			tr.cancelKey("session " + sid)
		}
		key := "request " + rand.Text()
		r.Header.Set(callKeyHeader, key)
		// A dropped client ends r's context while h still runs (in
		// stateless mode h waits for the call to end before it returns);
		// a session closed for being idle makes h return first.
		stop := context.AfterFunc(r.Context(), func() { tr.cancelKey(key) })
		h.ServeHTTP(w, r)
		stop()
		tr.cancelKey(key)
	})
}

// begin counts a call and returns its context, which Handler cancels when
// the call's HTTP request ends, and the function that ends the call. Call
// end after everything about the call is recorded.
func (tr *Tracker) begin(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &trackedCall{cancel: cancel}
	// The keys under which Handler finds the call: its HTTP request, and
	// its session (for a DELETE).
	var keys []string
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if k := req.Extra.Header.Get(callKeyHeader); k != "" {
			keys = append(keys, k)
			if req.Session != nil && req.Session.ID() != "" {
				keys = append(keys, "session "+req.Session.ID())
			}
		}
	}
	tr.mu.Lock()
	tr.addLocked(&tr.n, 1)
	for _, key := range keys {
		if tr.byKey == nil {
			tr.byKey = map[string]map[*trackedCall]struct{}{}
		}
		if tr.byKey[key] == nil {
			tr.byKey[key] = map[*trackedCall]struct{}{}
		}
		tr.byKey[key][c] = struct{}{}
	}
	tr.mu.Unlock()
	return ctx, func() {
		tr.mu.Lock()
		for _, key := range keys {
			delete(tr.byKey[key], c)
			if len(tr.byKey[key]) == 0 {
				delete(tr.byKey, key)
			}
		}
		tr.addLocked(&tr.n, -1)
		tr.mu.Unlock()
		cancel(context.Canceled)
	}
}

// hold counts a warm session until the returned function is called, once
// its process tree is reaped.
func (tr *Tracker) hold() func() {
	tr.mu.Lock()
	tr.addLocked(&tr.held, 1)
	tr.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			tr.mu.Lock()
			tr.addLocked(&tr.held, -1)
			tr.mu.Unlock()
		})
	}
}

// addLocked adds delta to the counter c (tr.n or tr.held) and opens or
// closes the idle channel. tr.mu must be held.
func (tr *Tracker) addLocked(c *int, delta int) {
	*c += delta
	switch {
	case tr.n+tr.held == 0 && tr.idle != nil:
		close(tr.idle)
		tr.idle = nil
	case tr.n+tr.held > 0 && tr.idle == nil:
		tr.idle = make(chan struct{})
	}
}

// cancelKey cancels the calls registered under key: those of an HTTP
// request, or of a session.
func (tr *Tracker) cancelKey(key string) {
	tr.mu.Lock()
	calls := tr.byKey[key]
	delete(tr.byKey, key)
	tr.mu.Unlock()
	for c := range calls {
		c.cancel(ErrClientGone)
	}
}
