package gemini

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// Gemini CLI 0.61.0 reports the retries of a failed model request only on
// standard error, in both of its modes (retryWithBackoff in
// packages/core/src/utils/retry.ts, measured with general.maxAttempts 2):
//
//	Attempt 1 failed: Resource has been exhausted (e.g. check quota).
//	Suggested retry after 2s.. Retrying after 5521ms...
//
// for an error that says when to retry (a google.rpc.RetryInfo, or a
// per-minute quota, which Gemini turns into "Suggested retry after 60s."),
// the message and the delay on one line when the error's message has one
// line, and
//
//	Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {"error":{"code":429,...}}
//
// followed by the rest of a dump of the error otherwise. Its last attempt says "Max
// attempts reached" instead. Neither stream-json nor ACP carries a retry,
// and Gemini reports no rate-limit state at all: no KindRateLimit event.
// In ACP mode its standard error reaches the pipe only when it exits, so
// only Invoke sees the retries as they happen; a session notes them the
// same way in case a later version writes them at once.

var (
	attemptRE   = regexp.MustCompile(`^Attempt (\d+) failed(?: with status (\d+))?`)
	retryingRE  = regexp.MustCompile(`Retrying after (\d+)ms\.\.\.$`)
	suggestedRE = regexp.MustCompile(`(?:Suggested retry after|Please retry in) ([0-9.]+(?:ms|s))`)
)

// A retryLog collects the retries stderr reports, for the decoder to
// report as KindWarning events with the next line of stdout: the Stderr
// hook cannot emit events. It is used under the engine's decoder lock.
type retryLog struct {
	cur  *invoker.Retry // the attempt whose lines are being read
	text string         // what cur's first line said
	done []retryNote
	// resetsAt is when the last reported rate limit resets.
	resetsAt time.Time
}

type retryNote struct {
	r    invoker.Retry
	text string
}

// stderr reads one line of standard error, read at now.
func (l *retryLog) stderr(b []byte, now time.Time) {
	s := strings.TrimSpace(string(trimLeadingANSI(b)))
	if m := attemptRE.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		status, _ := strconv.Atoi(m[2])
		l.cur, l.text = &invoker.Retry{Attempt: n, HTTPStatus: status}, s
	} else if l.cur == nil {
		return
	}
	if m := suggestedRE.FindStringSubmatch(s); m != nil {
		if d, ok := geminiDuration(m[1]); ok {
			l.cur.ResetsAt = now.Add(d)
			l.resetsAt = l.cur.ResetsAt
		}
	}
	switch {
	case strings.Contains(s, "Max attempts reached"):
		l.cur = nil // the last attempt: the turn fails with the error
	case strings.Contains(s, "Retrying with backoff..."):
		l.finish()
	default:
		if m := retryingRE.FindStringSubmatch(s); m != nil {
			ms, _ := strconv.Atoi(m[1])
			l.cur.Delay = time.Duration(ms) * time.Millisecond
			l.finish()
		}
	}
}

func (l *retryLog) finish() {
	text := strings.Replace(l.text, " Retrying with backoff...", "", 1)
	text = retryingRE.ReplaceAllString(text, "")
	l.done = append(l.done, retryNote{r: *l.cur, text: strings.TrimSpace(text)})
	l.cur = nil
}

// events returns the retries reported since the last call, as warnings
// carrying raw (the line of stdout they are reported with).
func (l *retryLog) events(raw json.RawMessage) []invoker.Event {
	if len(l.done) == 0 {
		return nil
	}
	evs := make([]invoker.Event, 0, len(l.done))
	for _, n := range l.done {
		r := n.r
		msg := fmt.Sprintf("gemini retries a model request (%s)", n.text)
		if r.Delay > 0 {
			msg += fmt.Sprintf(" after %v", r.Delay)
		}
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Text: msg, Retry: &r, Raw: raw})
	}
	l.done = l.done[:0]
	return evs
}

// resetTime returns when the rate limit an error message describes resets,
// counted from at, or the zero time when the message does not say: Gemini
// appends "Suggested retry after 7s." to the message of a
// google.rpc.RetryInfo (and "60s" for a per-minute quota failure), and the
// API itself may say "Please retry in 7.5s".
func resetTime(msg string, at time.Time) time.Time {
	m := suggestedRE.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}
	}
	d, ok := geminiDuration(m[1])
	if !ok {
		return time.Time{}
	}
	return at.Add(d)
}

// geminiDuration parses a delay as Gemini writes it ("7s", "1.5s",
// "300ms"), as parseDurationInSeconds does.
func geminiDuration(s string) (time.Duration, bool) {
	unit := time.Second
	num, ok := strings.CutSuffix(s, "ms")
	if ok {
		unit = time.Millisecond
	} else if num, ok = strings.CutSuffix(s, "s"); !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f > 1e7 {
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}
