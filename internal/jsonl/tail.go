package jsonl

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// ellipsis starts the result of [Tail.String] when bytes were dropped.
const ellipsis = "…"

// Tail keeps the last n bytes written to it, for showing the end of a
// process's stderr in errors. Safe for concurrent use. The zero value is not
// usable; use [NewTail].
type Tail struct {
	mu    sync.Mutex
	n     int
	buf   []byte // ring of the last min(total, n+1) bytes; grows until full
	start int    // index of the oldest byte in buf once buf is full
	total int64
}

var _ io.Writer = (*Tail)(nil)

// NewTail returns a Tail that keeps the last n bytes written to it. Memory
// grows with what is written, up to about n bytes. NewTail panics if n is
// negative.
func NewTail(n int) *Tail {
	if n < 0 {
		panic("jsonl: negative tail size")
	}
	return &Tail{n: n}
}

// size is the capacity of the ring: one byte more than is shown, so that
// String can tell whether the cut fell just after a "\n".
func (t *Tail) size() int { return t.n + 1 }

// Write keeps the end of p and drops what no longer fits. It never fails:
// it always returns len(p), nil.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	size := t.size()
	q := p
	if len(q) >= size {
		// Only the end of p survives: it replaces everything.
		if cap(t.buf) < size {
			t.buf = make([]byte, size)
		}
		t.buf = t.buf[:size]
		copy(t.buf, q[len(q)-size:])
		t.start = 0
		return len(p), nil
	}
	if len(t.buf) < size {
		k := min(size-len(t.buf), len(q))
		if len(t.buf)+k > cap(t.buf) {
			// Grow by doubling, but never past the ring's size.
			nb := make([]byte, len(t.buf), min(max(2*cap(t.buf), len(t.buf)+k, 512), size))
			copy(nb, t.buf)
			t.buf = nb
		}
		t.buf = append(t.buf, q[:k]...)
		q = q[k:]
	}
	for len(q) > 0 {
		k := copy(t.buf[t.start:], q)
		q = q[k:]
		t.start += k
		if t.start == size {
			t.start = 0
		}
	}
	return len(p), nil
}

// String returns the kept bytes as text.
//
// If nothing was dropped, that is all bytes written. Otherwise the result
// starts with "…" and, so that it does not begin in the middle of a line,
// leaves out the partial first line: it is "…\n" followed by the kept bytes
// from the first line boundary on. When the kept bytes hold no line boundary
// (one long line, or only a final "\n"), it is "…" followed by the kept bytes
// from the cut on, less the continuation bytes of a UTF-8 sequence split by
// the cut. Either way the result is at most n+4 bytes long.
//
// Stderr is free-form output, not always UTF-8, and the tail ends up in
// error messages, logs and JSON. So String replaces each run of invalid
// UTF-8 with U+FFFD (see [strings.ToValidUTF8]) and always returns valid
// UTF-8; a multi-byte character still being written is shown as U+FFFD.
func (t *Tail) String() string {
	t.mu.Lock()
	kept := make([]byte, 0, len(t.buf))
	kept = append(kept, t.buf[t.start:]...)
	kept = append(kept, t.buf[:t.start]...)
	cut := t.total > int64(t.n)
	t.mu.Unlock()

	if !cut {
		return valid(kept)
	}
	prev, kept := kept[0], kept[1:]
	if prev == '\n' {
		return ellipsis + "\n" + valid(kept)
	}
	if i := bytes.IndexByte(kept, '\n'); i >= 0 && i+1 < len(kept) {
		return ellipsis + "\n" + valid(kept[i+1:])
	}
	for j := 0; j < utf8.UTFMax-1 && len(kept) > 0 && !utf8.RuneStart(kept[0]); j++ {
		kept = kept[1:]
	}
	return ellipsis + valid(kept)
}

// Len returns the total number of bytes ever written, kept or dropped.
func (t *Tail) Len() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

func valid(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// LastLines returns at most n trailing non-empty lines of s, joined by
// " | " and cut to max bytes from their end, for a one-line error message.
func LastLines(s string, n, max int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var kept []string
	for i := len(lines) - 1; i >= 0 && len(kept) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			kept = append(kept, l)
		}
	}
	slices.Reverse(kept)
	out := strings.Join(kept, " | ")
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return out
}
