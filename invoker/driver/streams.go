package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/pipe"
	"github.com/clinvoke/clinvoke/invoker"
)

// junkMax bounds how much of a line that is not an event is kept for
// ErrNoResult's message.
const junkMax = 200

// readStdout decodes stdout line by line and delivers the events.
func (r *run) readStdout() {
	rd := jsonl.NewReader(r.stdoutW, r.cfg.maxLineSize)
	failed := false // the decoder returned a fatal error
	for {
		line, err := rd.ReadLine()
		if err != nil {
			var tooLong *jsonl.LineTooLongError
			if errors.As(err, &tooLong) {
				r.skipped++
				r.skippedMax = max(r.skippedMax, tooLong.Size)
				if r.onSkip != nil {
					r.onSkip(tooLong.Size)
				}
				r.deliver([]invoker.Event{{
					Kind: invoker.KindWarning,
					Text: fmt.Sprintf("skipped a stdout line of %d bytes: it exceeds the line limit of %d bytes (see Options.MaxLineSize); the turn will fail with ErrLineTooLong", tooLong.Size, tooLong.Max),
				}})
				continue
			}
			if err != io.EOF && !errors.Is(err, os.ErrClosed) && !pipe.IsPTYEnd(err) {
				r.log.Debug("reading stdout", "err", err)
			}
			return
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		r.lines++
		if r.junk == nil && trimmed[0] != '{' {
			// Not an event: keep its start for ErrNoResult's message.
			r.junk = bytes.Clone(trimmed[:min(len(trimmed), junkMax)])
		}
		if failed {
			// After a fatal error the decoder's state is not to be
			// trusted: a later line must not turn the failure into a
			// success. The rest is drained, not decoded.
			continue
		}
		events, ferr := r.decode(line)
		r.deliver(events)
		if r.afterLine != nil {
			r.afterLine()
		}
		if ferr != nil {
			failed = true
			r.fail(ferr)
		}
	}
}

// decode runs the decoder on one line; a panic in it becomes a warning.
func (r *run) decode(line []byte) (events []invoker.Event, err error) {
	r.decMu.Lock()
	defer r.decMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("decoder panicked", "panic", p, "stack", string(debug.Stack()))
			events = []invoker.Event{{Kind: invoker.KindWarning, Text: fmt.Sprintf("decoder failed on a line: %v", p), Raw: safeRaw(line)}}
			err = nil
		}
	}()
	return r.dec.Decode(line)
}

// deliver hands events to OnEvent. If OnEvent panics or calls
// runtime.Goexit, the run is killed at once, no further event is
// delivered, and Invoke re-raises the panic (or calls Goexit) after the
// tree is reaped.
func (r *run) deliver(events []invoker.Event) {
	for _, ev := range events {
		// Every event carries the session id once the CLI reported it,
		// whichever backend decoded it.
		if ev.SessionID != "" {
			r.sessionID = ev.SessionID
		} else {
			ev.SessionID = r.sessionID
		}
		if ev.Kind != invoker.KindWarning {
			r.firstOnce.Do(func() { close(r.firstEvent) })
		}
		if ev.Kind == invoker.KindDelta && !r.deltas {
			continue
		}
		if r.onEvent == nil || r.panicked.Load() {
			continue
		}
		r.callOnEvent(ev)
	}
}

// readStderr keeps the tail of stderr and shows each line to the decoder,
// which may recognise a fatal signature in it.
func (r *run) readStderr() {
	// Small: a run holds it for its whole life, CLIs write little to
	// stderr, and the tail keeps its own copy.
	buf := make([]byte, 4<<10)
	var partial []byte
	overlong := false // partial is the start of a line longer than maxLine
	const maxLine = 16 << 10
	check := func(line []byte) {
		if len(bytes.TrimSpace(line)) == 0 {
			return
		}
		r.decMu.Lock()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = nil
				}
			}()
			return r.dec.Stderr(line)
		}()
		r.decMu.Unlock()
		if err != nil {
			r.fail(err)
		}
	}
	for {
		n, err := r.stderrW.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			r.tail.Write(chunk)
			for {
				i := bytes.IndexByte(chunk, '\n')
				if i < 0 {
					if overlong || len(partial)+len(chunk) > maxLine {
						// Only the start of an over-long line is
						// checked; never splice its later pieces.
						overlong = true
					} else {
						partial = append(partial, chunk...)
					}
					break
				}
				switch {
				case overlong:
					check(partial)
				case len(partial) > 0:
					check(append(partial, chunk[:i]...))
				default:
					check(chunk[:i])
				}
				partial, overlong = partial[:0], false
				chunk = chunk[i+1:]
			}
		}
		if err != nil {
			check(partial)
			return
		}
	}
}

// writePrompt writes the prompt and closes stdin, so that CLIs that read
// their prompt to end of file start working. It runs concurrently with the
// readers, so a prompt larger than the pipe's buffer cannot deadlock.
func (r *run) writePrompt() {
	_, err := io.WriteString(r.stdin, r.cmd.Stdin)
	if err != nil && !errors.Is(err, os.ErrClosed) {
		r.log.Debug("writing the prompt", "err", err)
	}
	r.stdin.Close()
}
