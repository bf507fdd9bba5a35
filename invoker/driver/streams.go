package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/pipe"
	"github.com/clinvoke/clinvoke/invoker"
)

// junkMax bounds how much of a line that is not an event is kept for
// ErrNoResult's message.
const junkMax = 200

// readStdout reads stdout line by line, without a fixed line limit, and
// hands each line to the conversation.
func (r *run) readStdout() {
	rd := jsonl.NewReader(r.stdoutW, r.cfg.maxLineSize)
	failed := false // the conversation returned a fatal error
	for {
		line, err := rd.ReadLine()
		if err != nil {
			var tooLong *jsonl.LineTooLongError
			if errors.As(err, &tooLong) {
				r.stats.skipped++
				r.stats.skippedMax = max(r.stats.skippedMax, tooLong.Size)
				r.conv.lineSkipped(tooLong.Size)
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
		r.stats.lines++
		if r.stats.junk == nil && trimmed[0] != '{' {
			// Not an event: keep its start for ErrNoResult's message.
			r.stats.junk = bytes.Clone(trimmed[:min(len(trimmed), junkMax)])
		}
		if failed {
			// After a fatal error the decoder's state is not to be
			// trusted: a later line must not turn the failure into a
			// success. The rest is drained, not decoded.
			continue
		}
		if err := r.conv.stdoutLine(line); err != nil {
			failed = true
			r.fail(err)
		}
	}
}

// readStderr keeps the tail of stderr and shows each line to the
// conversation, which may recognise a fatal signature in it.
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
		if err := r.conv.stderrLine(line); err != nil {
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

// decodeLine runs decode, a decoder's or protocol's reading of line, and
// turns a panic in it into a warning: a decoder must never panic, and a
// panic of one must not take the program down.
func decodeLine(log *slog.Logger, line []byte, decode func() ([]invoker.Event, error)) (events []invoker.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("decoder panicked", "panic", p, "stack", string(debug.Stack()))
			events = []invoker.Event{{Kind: invoker.KindWarning, Text: fmt.Sprintf("decoder failed on a line: %v", p), Raw: safeRaw(line)}}
			err = nil
		}
	}()
	return decode()
}

// inspectStderr runs inspect, a decoder's or protocol's Stderr, on one
// line; a panic in it is dropped.
func inspectStderr(inspect func() error) (err error) {
	defer func() {
		if recover() != nil {
			err = nil
		}
	}()
	return inspect()
}

// skippedWarning is the event of a stdout line of size bytes skipped over
// the line limit max.
func skippedWarning(size int64, max int) invoker.Event {
	return invoker.Event{
		Kind: invoker.KindWarning,
		Text: fmt.Sprintf("skipped a stdout line of %d bytes: it exceeds the line limit of %d bytes (see Options.MaxLineSize); the turn will fail with ErrLineTooLong", size, max),
	}
}

// A stamper sets on each event that has none the latest session id an
// event reported, so that every event carries the session once the CLI
// reported it, whichever backend decoded it. Only a run's stdout reader
// uses it.
type stamper struct{ id string }

func (s *stamper) stamp(events []invoker.Event) {
	for i := range events {
		if events[i].SessionID != "" {
			s.id = events[i].SessionID
		} else {
			events[i].SessionID = s.id
		}
	}
}
