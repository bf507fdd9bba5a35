package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clinvoke/clinvoke/invoker"
)

// notifyFunc sends one progress notification. progress increases with
// every call.
type notifyFunc func(ctx context.Context, msg string, progress float64) error

// A reporter turns the messages of one call into progress notifications:
// at most one per interval (the latest message wins, the ones in between
// are dropped) and a heartbeat after every silence of heartbeat. The
// interval holds for heartbeats too, so a heartbeat shorter than the
// interval acts as the interval.
//
// post never blocks, so Request.OnEvent, which holds up the reading of the
// CLI's output, stays fast even when the client reads slowly; one goroutine
// per call does the sending. A nil *reporter (no progress token) does
// nothing.
type reporter struct {
	notify    notifyFunc
	every     time.Duration
	heartbeat time.Duration
	onErr     func(error)

	mu     sync.Mutex
	latest string // newest message not yet sent
	last   string // newest message posted, for heartbeats

	wake   chan struct{} // buffered(1): a message is waiting
	cancel context.CancelFunc
	done   chan struct{}
}

// startReporter starts the sending goroutine. It stops when ctx is done or
// when stop is called; stop waits for it, so no notification of the call
// is sent after stop returns.
func startReporter(ctx context.Context, notify notifyFunc, every, heartbeat time.Duration, onErr func(error)) *reporter {
	if notify == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &reporter{
		notify:    notify,
		every:     every,
		heartbeat: heartbeat,
		onErr:     onErr,
		wake:      make(chan struct{}, 1),
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	go r.loop(ctx)
	return r
}

// post offers msg to be sent as soon as the rate limit allows.
func (r *reporter) post(msg string) {
	if r == nil || msg == "" {
		return
	}
	r.mu.Lock()
	r.latest, r.last = msg, msg
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// stop ends the reporter and waits for its goroutine.
func (r *reporter) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *reporter) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := r.latest
	r.latest = ""
	return msg
}

func (r *reporter) loop(ctx context.Context) {
	defer close(r.done)
	start := time.Now()
	var (
		n        float64
		lastSent time.Time // zero: nothing sent yet, the first message goes at once
		gate     <-chan time.Time
		gateT    *time.Timer
	)
	hb := time.NewTimer(r.heartbeat)
	defer hb.Stop()
	defer func() {
		if gateT != nil {
			gateT.Stop()
		}
	}()
	send := func(msg string) {
		n++
		if err := r.notify(ctx, msg, n); err != nil && ctx.Err() == nil && r.onErr != nil {
			r.onErr(err)
		}
		lastSent = time.Now()
		hb.Reset(r.heartbeat)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			if gate != nil {
				continue // the pending gate sends the latest message
			}
			if wait := r.every - time.Since(lastSent); !lastSent.IsZero() && wait > 0 {
				gateT = time.NewTimer(wait)
				gate = gateT.C
				continue
			}
			if msg := r.take(); msg != "" {
				send(msg)
			}
		case <-gate:
			gate, gateT = nil, nil
			if msg := r.take(); msg != "" {
				send(msg)
			}
		case <-hb.C:
			// A heartbeat is a notification too: it keeps the interval
			// after the previous one, and gives way to a gated message,
			// whose sending restarts the heartbeat. Without this, a
			// heartbeat not longer than the interval went out next to
			// the gated message.
			if gate != nil {
				hb.Reset(r.heartbeat)
				continue
			}
			if wait := r.every - time.Since(lastSent); wait > 0 {
				hb.Reset(wait)
				continue
			}
			r.mu.Lock()
			last := r.last
			r.mu.Unlock()
			msg := fmt.Sprintf("still running (%s)", time.Since(start).Round(time.Second))
			if last != "" {
				msg += "; last: " + last
			}
			send(msg)
		}
	}
}

// maxSnippet bounds the length, in runes, of text quoted in a progress
// message.
const maxSnippet = 120

// snippet returns s on one line, with runs of white space collapsed, cut
// to at most n runes with an ellipsis. With fromEnd it keeps the end of s.
func snippet(s string, n int, fromEnd bool) string {
	s = strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	if fromEnd {
		return "…" + string(r[len(r)-n+1:])
	}
	return string(r[:n-1]) + "…"
}

// An observer watches one run's events: it posts progress messages and
// remembers the session id and text, which are all there is to report when
// the invoker panics before returning a Result.
type observer struct {
	prefix string // "[3] " for a task of a parallel call
	rep    *reporter
	// onSession, if not nil, is called once, with the first session id
	// an event carries.
	onSession func(sessionID string)

	mu        sync.Mutex
	sessionID string
	text      strings.Builder
	delta     bool // text holds deltas of a message still streaming
}

func (o *observer) onEvent(ev invoker.Event) {
	o.mu.Lock()
	first := ev.SessionID != "" && o.sessionID == ""
	if ev.SessionID != "" {
		o.sessionID = ev.SessionID
	}
	streaming := ev.Kind == invoker.KindDelta && ev.Delta == invoker.KindMessage
	if ev.Kind == invoker.KindMessage || streaming {
		if !streaming || !o.delta {
			o.text.Reset()
		}
		o.text.WriteString(ev.Text)
		o.delta = streaming
	}
	var streamed string
	if streaming {
		streamed = o.text.String()
	}
	o.mu.Unlock()
	if first && o.onSession != nil {
		o.onSession(ev.SessionID)
	}
	if o.rep == nil {
		return
	}
	if msg := describe(ev, streamed); msg != "" {
		o.rep.post(o.prefix + msg)
	}
}

// partial returns the session id and text seen so far.
func (o *observer) partial() (sessionID, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sessionID, o.text.String()
}

// describe returns a short progress message for ev, or "" for events not
// worth a message. streamed is the text of the message so far, for delta
// events.
func describe(ev invoker.Event, streamed string) string {
	switch ev.Kind {
	case invoker.KindSession:
		return "session " + ev.SessionID
	case invoker.KindDelta:
		if ev.Delta == invoker.KindMessage {
			return "writing: " + snippet(streamed, maxSnippet, true)
		}
		return "thinking…"
	case invoker.KindMessage:
		return "message: " + snippet(ev.Text, maxSnippet, false)
	case invoker.KindReasoning:
		if s := snippet(ev.Text, maxSnippet, false); s != "" {
			return "thinking… " + s
		}
		return "thinking…"
	case invoker.KindToolCall:
		return describeTool(ev.Tool)
	case invoker.KindToolResult:
		if ev.Tool != nil && (ev.Tool.Status == "failed" || ev.Tool.Status == "error") {
			return "tool failed: " + toolName(ev.Tool)
		}
		return ""
	case invoker.KindWarning:
		return "warning: " + snippet(ev.Text, maxSnippet, false)
	case invoker.KindError:
		return "error: " + snippet(ev.Text, maxSnippet, false)
	case invoker.KindDone:
		return "finishing"
	case invoker.KindQueued:
		var until time.Time
		if ev.RateLimit != nil {
			until = ev.RateLimit.ResetsAt
		}
		return queuedText(ev.Ahead, until, "")
	}
	return ""
}

func toolName(t *invoker.Tool) string {
	if t == nil || t.Name == "" {
		return "tool"
	}
	return t.Name
}

// describeTool names a tool call by what it does: the command line of a
// shell tool, else the tool's name and its most telling argument.
func describeTool(t *invoker.Tool) string {
	if t == nil {
		return "running a tool"
	}
	var args map[string]any
	_ = json.Unmarshal(t.Input, &args) // not an object: no arguments shown
	for _, k := range []string{"command", "cmd"} {
		switch v := args[k].(type) {
		case string:
			return "running: " + snippet(v, maxSnippet, false)
		case []any:
			var parts []string
			for _, p := range v {
				parts = append(parts, fmt.Sprint(p))
			}
			return "running: " + snippet(strings.Join(parts, " "), maxSnippet, false)
		}
	}
	for _, k := range []string{"file_path", "path", "pattern", "query", "url", "description"} {
		if v, ok := args[k].(string); ok && v != "" {
			return toolName(t) + ": " + snippet(v, maxSnippet, false)
		}
	}
	return toolName(t)
}
