package mcpadapter

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools is what one [Register] call added to a server: the two tools of
// each invoker, and the calls and warm sessions they have in flight. It
// owns their lifetime the way an *http.Server owns its connections':
// [Tools.Shutdown] stops them, [Tools.Wait], [Tools.Active] and
// [Tools.Calls] follow them, [Tools.Cancel] stops those of one identity,
// and [Tools.Handler] guards the streamable HTTP transport
// (Options.HTTPAccess) and ends the calls whose request ended.
//
// It is named for what Register made rather than Adapter or Server: the
// mcp.Server stays the server, a server may carry the Tools of several
// Register calls (each with its own options and lifetime), and
// mcpadapter.Adapter would repeat the package's name.
//
// A Tools is safe for concurrent use. Its methods apply to the calls of
// its own tools only.
type Tools struct {
	sh *shared
}

// shared is what the tools of one Register call have in common.
type shared struct {
	cfg   *config
	slots *slots // Options.MaxConcurrent and MaxConcurrentPerIdentity
	tr    *transcript
	warm  *warmPool // nil when Options.WarmSessions keeps none
	calls *callSet
	// owners: which identity ran each session, for the resume check.
	owners sessionOwners
	// life is done once Shutdown is called, with ErrShuttingDown as its
	// cause; stop ends it.
	life context.Context
	stop context.CancelCauseFunc
	// server is the server the tools are registered on.
	server *mcp.Server
}

func newShared(cfg *config) *shared {
	life, stop := context.WithCancelCause(context.Background())
	sh := &shared{
		cfg:   cfg,
		slots: newSlots(cfg.maxConcurrent, cfg.maxPerIdentity),
		tr:    &transcript{path: cfg.transcript},
		calls: new(callSet),
		life:  life,
		stop:  stop,
	}
	cfg.access.revoke = func(token *tokenRef) {
		n := sh.calls.cancelKey(token.callKey(), ErrRevoked)
		cfg.log.Warn("token removed from the set: the calls it authorized are cancelled", "identity", token.name, "calls", n)
	}
	return sh
}

// Shutdown stops the tools. From its first call on, calls are refused
// (an isError result of status "refused": "the server is shutting down",
// nothing started); every run in flight is cancelled with ErrShuttingDown
// as the cause (context.Cause), and its call answered with an isError
// result of status "cancelled" that holds the partial text and the
// session id; every warm session (Options.WarmSessions) is closed, at
// once if idle, when its call ends if busy.
//
// Then Shutdown waits, as [Tools.Wait] does, until every call has ended
// (its run's process tree reaped, its transcript line and log record
// written) and every warm session's tree is reaped; it returns nil then,
// or ctx.Err() if ctx is done first. The runs go on being stopped after
// an early return, and a later Wait waits for them again. Shutdown may be
// called more than once, and concurrently; the tools stay on the server
// and refuse every call.
//
// Unlike http.Server.Shutdown, which lets the requests in flight finish,
// Shutdown cancels the runs: an agent turn may take many minutes, and an
// MCP host that stops its server kills it soon after its first signal
// (Claude Code: SIGKILL 500 ms later). How a cancelled run's tree is
// stopped is the invoker's ladder; an invoker whose
// invoker.Options.StopGraces recognises ErrShuttingDown walks a shorter
// one for these cancels than for a client's, so that the runs are reaped,
// and recorded, before the host's SIGKILL.
//
// The go-sdk's Server.Run and ServerSession.Close wait for the tool
// handlers in flight to return instead of cancelling them: start
// Shutdown before closing the server's sessions, or while they close,
// not after.
func (t *Tools) Shutdown(ctx context.Context) error {
	t.sh.stop(ErrShuttingDown)
	return t.Wait(ctx)
}

// Wait returns nil once no call is in progress and no warm session is
// alive, or ctx.Err() if ctx is done first. A call stops counting only
// once its run's tree is reaped and its transcript line and log record
// are written, and a warm session once its tree is reaped, so a server
// that exits when Wait returns loses no record. Calls that start while
// Wait waits count too: before [Tools.Shutdown], Wait returns at a moment
// when the tools are idle, which the next call ends.
func (t *Tools) Wait(ctx context.Context) error {
	return t.sh.calls.wait(ctx)
}

// Active returns the number of calls in progress: a parallel call counts
// once, an idle warm session not at all.
func (t *Tools) Active() int {
	c := t.sh.calls
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// callKeyHeader is the request header with which Tools.Handler tells the
// tool handlers which HTTP request carried their call. The SDK hands the
// headers of that request to the handler (RequestExtra.Header); it does
// not hand over the request's context. The Handler overwrites any value a
// client sends, so a client cannot name another's request.
const callKeyHeader = "Clinvoke-Call-Key"

// sessionIDHeader is the header of the streamable HTTP transport that
// names a session.
const sessionIDHeader = "Mcp-Session-Id"

// Handler returns h (the SDK's streamable HTTP handler) wrapped so that
// only the clients that Options.HTTPAccess allows reach it (by default:
// requests from this machine, from no browser page but those of loopback
// origins; see [HTTPAccess]), and so that a call of t's tools is
// cancelled, with ErrClientGone as the cause, when the HTTP request that
// carried it ends before the call is answered: the client disconnected or
// closed its stream, its session was deleted (DELETE) or closed for being
// idle (StreamableHTTPOptions.SessionTimeout). Its run's process tree is
// killed and the call recorded as cancelled.
//
// Everything h serves is behind the same checks: a server that serves
// other paths beside the MCP endpoint (metrics) puts them in h.
//
// go-sdk v1.8.0 does none of this for the protocol versions clients use
// today: it lets a call whose stream dropped run to its end (nobody can
// read its answer without an event store), and closing a session waits
// for the calls in flight instead of cancelling them.
//
// Over stdio there is nothing to wrap: the SDK cancels the calls of a
// connection whose standard input reached end of file.
func (t *Tools) Handler(h http.Handler) http.Handler {
	c := t.sh.calls
	if !t.sh.cfg.tasks.Disabled {
		h = liftTasks(h) // the "task" of a tools/call, which the SDK drops
	}
	h = t.sh.streams(h) // resumable streams: retry field, session's version
	return t.sh.cfg.access.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get(sessionIDHeader); r.Method == http.MethodDelete && sid != "" {
			// The SDK's DELETE closes the session, which waits for the
			// calls in flight, whose requests end only once the session
			// is closed: cancel them first. Only those of the DELETE's
			// own identity: the SDK refuses another's (403).
			c.cancelKey(sessionKey(sid, requestIdentity(r)), ErrClientGone)
		}
		key := "request " + rand.Text()
		r.Header.Set(callKeyHeader, key)
		// A dropped client ends r's context while h still runs (in
		// stateless mode h waits for the call to end before it returns);
		// a session closed for being idle makes h return first.
		stop := context.AfterFunc(r.Context(), func() { c.cancelKey(key, ErrClientGone) })
		h.ServeHTTP(w, r)
		stop()
		c.cancelKey(key, ErrClientGone)
	}))
}

// bind returns the context of one call: done when the call's own context
// is done (the client cancelled, the connection closed) or when Shutdown
// is called, with ErrShuttingDown as the cause.
func (sh *shared) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if sh.life.Err() != nil {
		// AfterFunc would run its function in a goroutine of its own: a
		// call arriving after the shutdown must see it at once.
		cancel(ErrShuttingDown)
	}
	stop := context.AfterFunc(sh.life, func() { cancel(ErrShuttingDown) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// shuttingDown reports whether Shutdown was called.
func (sh *shared) shuttingDown() bool { return sh.life.Err() != nil }

// A callSet follows the calls in progress of one Register call's tools,
// and its warm sessions: what Tools.Wait waits for, and what
// Tools.Handler cancels.
type callSet struct {
	mu    sync.Mutex
	n     int           // calls in progress
	held  int           // warm sessions alive
	idle  chan struct{} // closed when n+held drops to 0; nil while it is 0
	byKey map[string]map[*trackedCall]struct{}
	all   map[*trackedCall]struct{} // the calls in progress, for Tools.Calls
}

type trackedCall struct {
	cancel context.CancelCauseFunc
	info   Call
}

func (cs *callSet) wait(ctx context.Context) error {
	for {
		cs.mu.Lock()
		if cs.n+cs.held == 0 {
			cs.mu.Unlock()
			return nil
		}
		idle := cs.idle
		cs.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// begin counts a call of toolName and returns its context, which Handler
// cancels when the call's HTTP request ends and which carries the call's
// identity, and the function that ends the call. Call end after
// everything about the call is recorded.
func (cs *callSet) begin(ctx context.Context, req *mcp.CallToolRequest, toolName string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &trackedCall{cancel: cancel, info: Call{Tool: toolName, Identity: identityOf(req), Start: time.Now(), Task: -1, Request: req}}
	if req != nil && req.Session != nil {
		c.info.Session = req.Session.ID()
	}
	ctx = withIdentity(ctx, c.info.Identity)
	ctx = context.WithValue(ctx, callStartKey{}, c.info.Start)
	// The keys under which Handler finds the call: its HTTP request, its
	// session and identity (for a DELETE), and the named token that
	// authorized it (for the token's removal).
	var keys []string
	if tok := tokenOf(req); tok != nil {
		keys = append(keys, tok.callKey())
	}
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if k := req.Extra.Header.Get(callKeyHeader); k != "" {
			keys = append(keys, k)
			if c.info.Session != "" {
				keys = append(keys, sessionKey(c.info.Session, c.info.Identity))
			}
		}
	}
	cs.mu.Lock()
	cs.addLocked(&cs.n, 1)
	if cs.all == nil {
		cs.all = map[*trackedCall]struct{}{}
	}
	cs.all[c] = struct{}{}
	for _, key := range keys {
		if cs.byKey == nil {
			cs.byKey = map[string]map[*trackedCall]struct{}{}
		}
		if cs.byKey[key] == nil {
			cs.byKey[key] = map[*trackedCall]struct{}{}
		}
		cs.byKey[key][c] = struct{}{}
	}
	cs.mu.Unlock()
	return ctx, func() {
		cs.mu.Lock()
		delete(cs.all, c)
		for _, key := range keys {
			delete(cs.byKey[key], c)
			if len(cs.byKey[key]) == 0 {
				delete(cs.byKey, key)
			}
		}
		cs.addLocked(&cs.n, -1)
		cs.mu.Unlock()
		cancel(context.Canceled)
	}
}

// hold counts a warm session until the returned function is called, once
// its process tree is reaped.
func (cs *callSet) hold() func() {
	cs.mu.Lock()
	cs.addLocked(&cs.held, 1)
	cs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			cs.mu.Lock()
			cs.addLocked(&cs.held, -1)
			cs.mu.Unlock()
		})
	}
}

// addLocked adds delta to the counter c (cs.n or cs.held) and opens or
// closes the idle channel. cs.mu must be held.
func (cs *callSet) addLocked(c *int, delta int) {
	*c += delta
	switch {
	case cs.n+cs.held == 0 && cs.idle != nil:
		close(cs.idle)
		cs.idle = nil
	case cs.n+cs.held > 0 && cs.idle == nil:
		cs.idle = make(chan struct{})
	}
}

// cancelKey cancels the calls registered under key (those of an HTTP
// request, of a session, or of a token) with cause, and returns how many.
func (cs *callSet) cancelKey(key string, cause error) int {
	cs.mu.Lock()
	calls := cs.byKey[key]
	delete(cs.byKey, key)
	cs.mu.Unlock()
	for c := range calls {
		c.cancel(cause)
	}
	return len(calls)
}
