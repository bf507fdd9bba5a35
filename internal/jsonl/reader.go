package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

const (
	// defaultBufSize is the size of the read buffer every line passes
	// through. Lines shorter than it (nearly all of them) cost one read
	// buffer slot and one exact-size allocation. Each Reader holds it for
	// its whole life, one per run in flight, so it is no bigger than the
	// lines that are common (CLI events of a few KiB; long tool outputs
	// take the chunked path).
	defaultBufSize = 32 << 10

	// maxChunkSize bounds the chunks a long line is gathered in. Chunks grow
	// by doubling from the buffer size up to this size, so the unused tail of
	// the last chunk is at most min(line length, maxChunkSize).
	maxChunkSize = 1 << 20

	// maxConsecutiveEmptyReads is how many (0, nil) reads in a row are
	// tolerated before reporting io.ErrNoProgress, as bufio does.
	maxConsecutiveEmptyReads = 100
)

var errInvalidRead = errors.New("jsonl: reader returned invalid count from Read")

// LineTooLongError is returned by [Reader.ReadLine] for a line longer than the
// Reader's limit. The line has been consumed and dropped; the next call to
// ReadLine returns the line after it.
type LineTooLongError struct {
	Size int64 // length of the dropped line in bytes, without "\n" or a trailing "\r"
	Max  int   // the Reader's limit
}

// Error reports the size of the dropped line and the limit it exceeded.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line of %d bytes exceeds the limit of %d bytes", e.Size, e.Max)
}

// Reader reads lines from an io.Reader, returning each one in a slice the
// caller owns. Lines of any length up to a limit are returned whole; longer
// ones are dropped without being buffered. Create one with [NewReader]; a
// Reader is not safe for concurrent use.
type Reader struct {
	rd  io.Reader
	max int

	buf     []byte
	r, w    int   // buf[r:w] holds bytes read but not yet returned
	scanned int   // buf[r:scanned] is known to hold no '\n'
	err     error // sticky read error, reported once buf[r:w] is used up

	// A line that does not fit in buf is gathered in chunks, each copied
	// from buf, and copied once more into an exact-size slice at its end:
	// peak memory is about twice the line, never the ~3x of a buffer grown
	// by doubling and then copied out.
	chunks [][]byte
	n      int64 // bytes of the current long line seen so far (kept or dropped)
	drop   bool  // the current long line is over the limit; its bytes are dropped
	last   byte  // the last byte of the current long line seen so far
}

// NewReader returns a Reader of r's lines; max is the longest line returned
// (bytes, excluding the newline). NewReader panics if max is negative.
func NewReader(r io.Reader, max int) *Reader {
	return newReaderSize(r, max, defaultBufSize)
}

// newReaderSize is NewReader with a given read buffer size; tests use tiny
// buffers to drive the long-line path with short inputs.
func newReaderSize(r io.Reader, max, size int) *Reader {
	if max < 0 {
		panic("jsonl: negative line limit")
	}
	if size < 1 {
		panic("jsonl: non-positive buffer size")
	}
	return &Reader{rd: r, max: max, buf: make([]byte, size)}
}

// ReadLine returns the next line without its "\n" (and without a trailing
// "\r"). An empty line is returned as an empty, non-nil slice.
//
// The returned slice belongs to the caller: the Reader never reuses or
// modifies it, so it may be kept (for example as a json.RawMessage) without
// copying. Its capacity equals its length.
//
// A line longer than max is consumed and discarded without buffering it
// whole; ReadLine then returns a nil line and a [*LineTooLongError] with its
// length, and the next call goes on with the following line.
//
// At the end of input, a final line without "\n" is returned like any other;
// then ReadLine returns io.EOF. Any other read error is returned as is, after
// the complete lines read before it; the bytes of an unterminated line read
// before such an error are discarded, since a truncated line is not a line
// of the stream. Once ReadLine has returned a read error or io.EOF, it
// returns the same error on every later call.
func (r *Reader) ReadLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.scanned:r.w], '\n'); i >= 0 {
			end := r.scanned + i
			piece := r.buf[r.r:end]
			r.r = end + 1
			r.scanned = r.r
			return r.finish(piece)
		}
		r.scanned = r.w
		if r.err != nil {
			return r.end()
		}
		r.fill()
	}
}

// fill makes room in buf and reads into it once (or until a read returns
// data or an error).
func (r *Reader) fill() {
	switch {
	case r.n > 0 || r.w-r.r == len(r.buf):
		// The pending bytes are part of a line that does not fit in buf
		// (continuing one, or starting one that fills it): move them out.
		if r.r < r.w {
			r.add(r.buf[r.r:r.w])
		}
		r.r, r.w, r.scanned = 0, 0, 0
	case r.w == len(r.buf):
		// The start of a short line sits at the end of buf: slide it down.
		n := copy(r.buf, r.buf[r.r:r.w])
		r.scanned -= r.r
		r.r, r.w = 0, n
	}
	for range maxConsecutiveEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			panic(errInvalidRead)
		}
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// add appends p, a piece of the current long line, to its chunks, or only
// counts it once the line is known to be over the limit.
func (r *Reader) add(p []byte) {
	kept := r.n
	r.n += int64(len(p))
	r.last = p[len(p)-1]
	if r.drop {
		return
	}
	// The line may still end in "\r\n", so max+1 bytes can be a line of
	// max bytes; only beyond that is it certainly too long.
	if r.n > int64(r.max)+1 {
		r.drop = true
		clear(r.chunks) // let the collector have them now
		r.chunks = nil
		return
	}
	for len(p) > 0 {
		if k := len(r.chunks); k == 0 || len(r.chunks[k-1]) == cap(r.chunks[k-1]) {
			size := len(r.buf)
			if k > 0 {
				size = min(2*cap(r.chunks[k-1]), maxChunkSize)
			}
			// Never allocate past what a line within the limit can need.
			size = int(min(int64(size), int64(r.max)+1-kept))
			r.chunks = append(r.chunks, make([]byte, 0, size))
		}
		c := &r.chunks[len(r.chunks)-1]
		k := copy((*c)[len(*c):cap(*c)], p)
		*c = (*c)[:len(*c)+k]
		p = p[k:]
		kept += int64(k)
	}
}

// finish completes the current line, whose last piece (possibly empty) is
// piece, an alias of buf.
func (r *Reader) finish(piece []byte) ([]byte, error) {
	if r.n == 0 {
		piece = dropCR(piece)
		if len(piece) > r.max {
			return nil, &LineTooLongError{Size: int64(len(piece)), Max: r.max}
		}
		line := make([]byte, len(piece))
		copy(line, piece)
		return line, nil
	}
	if len(piece) > 0 {
		r.add(piece)
	}
	size := r.n
	if r.last == '\r' {
		size--
	}
	chunks, drop := r.chunks, r.drop
	r.chunks, r.n, r.drop, r.last = nil, 0, false, 0
	if drop || size > int64(r.max) {
		return nil, &LineTooLongError{Size: size, Max: r.max}
	}
	line := make([]byte, size)
	off := 0
	for i, c := range chunks {
		off += copy(line[off:], c) // the last copy stops short of a "\r"
		chunks[i] = nil
	}
	return line, nil
}

// end handles a read error once no complete line is left in buf.
func (r *Reader) end() ([]byte, error) {
	if r.err != io.EOF {
		r.r, r.scanned = r.w, r.w
		r.chunks, r.n, r.drop, r.last = nil, 0, false, 0
		return nil, r.err
	}
	if r.r == r.w && r.n == 0 {
		return nil, io.EOF
	}
	piece := r.buf[r.r:r.w]
	r.r, r.scanned = r.w, r.w
	return r.finish(piece)
}

func dropCR(p []byte) []byte {
	if len(p) > 0 && p[len(p)-1] == '\r' {
		return p[:len(p)-1]
	}
	return p
}
