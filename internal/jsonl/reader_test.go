package jsonl

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// item is one result of ReadLine: a line, or the size of a dropped line.
type item struct {
	line    string
	tooLong int64 // > 0: a *LineTooLongError of this size
}

func (it item) String() string {
	if it.tooLong > 0 {
		return fmt.Sprintf("too long(%d)", it.tooLong)
	}
	return fmt.Sprintf("%q", it.line)
}

func line(s string) item   { return item{line: s} }
func tooLong(n int64) item { return item{tooLong: n} }

// readAll calls ReadLine until it returns an error other than
// *LineTooLongError and returns the items and that error.
func readAll(t testing.TB, r *Reader) ([]item, error) {
	t.Helper()
	var items []item
	for range 1 << 20 {
		l, err := r.ReadLine()
		var tl *LineTooLongError
		switch {
		case errors.As(err, &tl):
			if l != nil {
				t.Fatalf("ReadLine() = %q, %v; want nil line with the error", l, err)
			}
			if tl.Max != r.max {
				t.Fatalf("LineTooLongError.Max = %d, want %d", tl.Max, r.max)
			}
			items = append(items, tooLong(tl.Size))
		case err != nil:
			if l != nil {
				t.Fatalf("ReadLine() = %q, %v; want nil line with the error", l, err)
			}
			return items, err
		default:
			if l == nil {
				t.Fatalf("ReadLine() = nil, nil; want a non-nil line")
			}
			if cap(l) != len(l) {
				t.Fatalf("ReadLine() returned len %d cap %d; want an exact-size slice", len(l), cap(l))
			}
			items = append(items, line(string(l)))
		}
	}
	t.Fatal("ReadLine never returned an error")
	return nil, nil
}

// reference splits data the simple way: the behaviour Reader must match.
func reference(data []byte, max int) []item {
	if len(data) == 0 {
		return nil
	}
	parts := bytes.Split(data, []byte("\n"))
	if len(parts[len(parts)-1]) == 0 {
		parts = parts[:len(parts)-1] // data ended with "\n"
	}
	var items []item
	for _, p := range parts {
		p = bytes.TrimSuffix(p, []byte("\r"))
		if len(p) > max {
			items = append(items, tooLong(int64(len(p))))
		} else {
			items = append(items, line(string(p)))
		}
	}
	return items
}

func equalItems(a, b []item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sources are the ways a test feeds bytes to a Reader.
var sources = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"plain", func(r io.Reader) io.Reader { return r }},
	{"onebyte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"dataerr", iotest.DataErrReader},
}

// bufSizes are read buffer sizes that put line ends everywhere relative to
// buffer boundaries, plus the real default.
var bufSizes = []int{1, 2, 3, 5, 16, defaultBufSize}

func TestReadLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []item
	}{
		{"empty", "", 10, nil},
		{"one line", "a\n", 10, []item{line("a")}},
		{"no trailing newline", "a\nbc", 10, []item{line("a"), line("bc")}},
		{"CRLF", "a\r\nbc\r\n", 10, []item{line("a"), line("bc")}},
		{"CR at EOF", "a\r", 10, []item{line("a")}},
		{"only CR", "\r", 10, []item{line("")}},
		{"one CR dropped", "a\r\r\n", 10, []item{line("a\r")}},
		{"inner CR kept", "a\rb\n", 10, []item{line("a\rb")}},
		{"blank lines", "\n\na\n\n\r\n", 10, []item{line(""), line(""), line("a"), line(""), line("")}},
		{"only newline", "\n", 10, []item{line("")}},
		{"exactly max", "abcd\nx\n", 4, []item{line("abcd"), line("x")}},
		{"exactly max with CRLF", "abcd\r\nx\n", 4, []item{line("abcd"), line("x")}},
		{"max+1", "abcde\nx\n", 4, []item{tooLong(5), line("x")}},
		{"max+1 with CRLF", "abcde\r\nx\n", 4, []item{tooLong(5), line("x")}},
		{"max+1 at EOF", "x\nabcde", 4, []item{line("x"), tooLong(5)}},
		{"max 0", "\n\r\na\n", 0, []item{line(""), line(""), tooLong(1)}},
		{
			"several over-long in a row",
			"xxxxxx\nyyyyyyy\r\nzzzzzzzzzzzzzzzzzzzzzzzz\nok\n\nfine",
			4,
			[]item{tooLong(6), tooLong(7), tooLong(24), line("ok"), line(""), line("fine")},
		},
		{"non-UTF-8 kept as is", "\xff\xfe\n{\"a\":1}\n", 10, []item{line("\xff\xfe"), line(`{"a":1}`)}},
	}
	for _, tt := range tests {
		if got := reference([]byte(tt.in), tt.max); !equalItems(got, tt.want) {
			t.Fatalf("%s: reference() = %v, want %v; the test table is wrong", tt.name, got, tt.want)
		}
		for _, src := range sources {
			for _, size := range bufSizes {
				t.Run(fmt.Sprintf("%s/%s/buf%d", tt.name, src.name, size), func(t *testing.T) {
					r := newReaderSize(src.wrap(strings.NewReader(tt.in)), tt.max, size)
					got, err := readAll(t, r)
					if err != io.EOF {
						t.Fatalf("ReadLine() error = %v, want io.EOF", err)
					}
					if !equalItems(got, tt.want) {
						t.Errorf("lines = %v, want %v", got, tt.want)
					}
					if _, err := r.ReadLine(); err != io.EOF {
						t.Errorf("ReadLine() after EOF: error = %v, want io.EOF again", err)
					}
				})
			}
		}
	}
}

func TestReadLineReadError(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		in   string
		max  int
		want []item
	}{
		{"at line start", "a\nb\n", 10, []item{line("a"), line("b")}},
		{"mid line", "a\nb\npartial", 10, []item{line("a"), line("b")}},
		{"mid long line", "a\n" + strings.Repeat("x", 9), 10, []item{line("a")}},
		{"while dropping", "a\n" + strings.Repeat("x", 30), 10, []item{line("a")}},
	}
	for _, tt := range tests {
		for _, src := range sources[:3] { // DataErrReader only adds io.EOF
			for _, size := range bufSizes {
				t.Run(fmt.Sprintf("%s/%s/buf%d", tt.name, src.name, size), func(t *testing.T) {
					in := io.MultiReader(strings.NewReader(tt.in), iotest.ErrReader(errBoom))
					r := newReaderSize(src.wrap(in), tt.max, size)
					got, err := readAll(t, r)
					if err != errBoom {
						t.Fatalf("ReadLine() error = %v, want %v", err, errBoom)
					}
					if !equalItems(got, tt.want) {
						t.Errorf("lines = %v, want %v", got, tt.want)
					}
					if _, err := r.ReadLine(); err != errBoom {
						t.Errorf("ReadLine() after error: error = %v, want %v again", err, errBoom)
					}
					if r.chunks != nil || r.n != 0 {
						t.Errorf("Reader still holds %d bytes of the partial line", r.n)
					}
				})
			}
		}
	}
}

// dataThenErr returns its data and a non-EOF error in the same Read.
type dataThenErr struct {
	data []byte
	err  error
}

func (d *dataThenErr) Read(p []byte) (int, error) {
	n := copy(p, d.data)
	d.data = d.data[n:]
	if len(d.data) == 0 {
		return n, d.err
	}
	return n, nil
}

func TestReadLineDataWithError(t *testing.T) {
	errBoom := errors.New("boom")
	r := NewReader(&dataThenErr{data: []byte("a\nb\nc"), err: errBoom}, 10)
	got, err := readAll(t, r)
	if want := []item{line("a"), line("b")}; err != errBoom || !equalItems(got, want) {
		t.Errorf("readAll() = %v, %v; want %v, %v", got, err, want, errBoom)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReadLineNoProgress(t *testing.T) {
	r := NewReader(io.MultiReader(strings.NewReader("a\nb"), zeroReader{}), 10)
	got, err := readAll(t, r)
	if want := []item{line("a")}; err != io.ErrNoProgress || !equalItems(got, want) {
		t.Errorf("readAll() = %v, %v; want %v, %v", got, err, want, io.ErrNoProgress)
	}
}

func TestNewReaderNegativeMax(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewReader(r, -1) did not panic")
		}
	}()
	NewReader(strings.NewReader(""), -1)
}

// TestReadLineOwnership checks that returned lines are never touched again
// by the Reader and do not alias each other: the caller may keep them and
// even write to them.
func TestReadLineOwnership(t *testing.T) {
	var in bytes.Buffer
	var want []string
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		n := rng.IntN(300)
		if i%50 == 0 {
			n = 5000 // longer than the buffers below
		}
		l := strings.Repeat(string(rune('a'+i%26)), n)
		want = append(want, l)
		in.WriteString(l + "\n")
	}
	for _, size := range []int{7, 100, 4096, defaultBufSize} {
		t.Run(fmt.Sprintf("buf%d", size), func(t *testing.T) {
			r := newReaderSize(bytes.NewReader(in.Bytes()), 1<<20, size)
			var kept [][]byte
			var copies []string
			for {
				l, err := r.ReadLine()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				kept = append(kept, l)
				copies = append(copies, string(l))
				// Appending to a line must not reach into the Reader's
				// memory (its capacity is its length), and the earlier
				// lines must stay as they were.
				_ = append(l, "garbage"...)
				for i, k := range kept {
					if string(k) != copies[i] {
						t.Fatalf("line %d changed after a later ReadLine: %q, was %q", i, k, copies[i])
					}
				}
			}
			for i := range kept {
				if string(kept[i]) != want[i] {
					t.Errorf("line %d = %q, want %q", i, kept[i], want[i])
				}
				// Scribbling on a kept line must not change the others.
				for j := range kept[i] {
					kept[i][j] = '#'
				}
			}
			for i := range kept {
				if strings.Trim(string(kept[i]), "#") != "" {
					t.Errorf("line %d changed by writes to another line: %q", i, kept[i])
				}
			}
		})
	}
}

// bigLine returns n pseudo-random bytes without "\n" or "\r": the base64 of
// a ChaCha8 stream, made in bulk because a byte-at-a-time loop takes most of
// a minute for the 137 MiB that TestReadLineHuge needs under the race detector.
func bigLine(n int, seed uint64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	raw := make([]byte, base64.StdEncoding.DecodedLen(n)+3)
	rand.NewChaCha8(key).Read(raw)
	b := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
	base64.StdEncoding.Encode(b, raw)
	return b[:n:n]
}

func TestReadLineHuge(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	const max = 64 << 20
	l8 := bigLine(8<<20, 8)
	l64 := bigLine(64<<20, 64)
	lOver := bigLine(64<<20+1, 65) // one byte over the limit
	var in bytes.Buffer
	in.Grow(len(l8) + 3*len(l64) + 100)
	for _, part := range [][]byte{
		[]byte(`{"type":"start"}`), l8, []byte(`{"type":"mid"}`), l64, lOver, append(l64[:max-1:max-1], '\r'), []byte(`{"type":"end"}`),
	} {
		in.Write(part)
		in.WriteByte('\n')
	}
	want := []any{`{"type":"start"}`, l8, `{"type":"mid"}`, l64, int64(len(lOver)), l64[:max-1], `{"type":"end"}`}

	for _, src := range sources[:3] {
		if src.name == "onebyte" {
			continue // 150M one-byte reads; TestReadLineOneByteLong covers it
		}
		t.Run(src.name, func(t *testing.T) {
			r := NewReader(src.wrap(bytes.NewReader(in.Bytes())), max)
			for i, w := range want {
				got, err := r.ReadLine()
				switch w := w.(type) {
				case int64:
					var tl *LineTooLongError
					if !errors.As(err, &tl) || tl.Size != w || got != nil {
						t.Fatalf("line %d: ReadLine() = %d bytes, %v; want *LineTooLongError{Size: %d}", i, len(got), err, w)
					}
					continue
				case string:
					if err != nil || string(got) != w {
						t.Fatalf("line %d: ReadLine() = %q, %v; want %q", i, got, err, w)
					}
				case []byte:
					if err != nil || len(got) != len(w) || sha256.Sum256(got) != sha256.Sum256(w) {
						t.Fatalf("line %d: ReadLine() = %d bytes (sha256 %x), %v; want %d bytes (sha256 %x)",
							i, len(got), sha256.Sum256(got), err, len(w), sha256.Sum256(w))
					}
					if cap(got) != len(got) {
						t.Errorf("line %d: cap = %d, want %d", i, cap(got), len(got))
					}
				}
				// Nothing large may stay referenced by the Reader between lines.
				if r.chunks != nil || len(r.buf) != defaultBufSize {
					t.Errorf("after line %d the Reader holds %d chunks and a %d-byte buffer", i, len(r.chunks), len(r.buf))
				}
			}
			if _, err := r.ReadLine(); err != io.EOF {
				t.Errorf("ReadLine() at end: error = %v, want io.EOF", err)
			}
		})
	}
}

func TestReadLineOneByteLong(t *testing.T) {
	l := bigLine(300<<10, 3) // several default buffers long
	in := append(append([]byte("a\n"), l...), "\r\nb"...)
	r := NewReader(iotest.OneByteReader(bytes.NewReader(in)), 1<<20)
	got, err := readAll(t, r)
	if want := []item{line("a"), line(string(l)), line("b")}; err != io.EOF || !equalItems(got, want) {
		t.Errorf("readAll() = %d items, %v; want the 3 lines and io.EOF", len(got), err)
	}
}

// TestReadLineDropMemory checks that an over-long line is dropped as it
// arrives: reading a 64 MiB line with a 1 MiB limit allocates about the
// limit, not the line.
func TestReadLineDropMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 64 MiB")
	}
	in := append(bigLine(64<<20, 7), "\nok\n"...)
	r := NewReader(bytes.NewReader(in), 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.ReadLine()
	runtime.ReadMemStats(&after)
	var tl *LineTooLongError
	if !errors.As(err, &tl) || tl.Size != 64<<20 {
		t.Fatalf("ReadLine() error = %v, want *LineTooLongError{Size: %d}", err, 64<<20)
	}
	// The race detector and the runtime allocate a little on their own.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3<<20 {
		t.Errorf("dropping a 64 MiB line allocated %d bytes, want about the 1 MiB limit", alloc)
	}
	if l, err := r.ReadLine(); err != nil || string(l) != "ok" {
		t.Errorf("ReadLine() after the dropped line = %q, %v; want \"ok\"", l, err)
	}
}

// splitReader returns data in pieces whose sizes come from sizes (cycled);
// a size of 0 is an empty read. With eofWithData the last piece comes with
// io.EOF, like iotest.DataErrReader.
type splitReader struct {
	data        []byte
	sizes       []byte
	i           int
	eofWithData bool
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(s.data)
	if len(s.sizes) > 0 {
		// Empty reads at most every other call, well under the limit.
		n = int(s.sizes[s.i%len(s.sizes)]) % 40
		if n == 0 && s.i%2 == 1 {
			n = 1
		}
		s.i++
	}
	n = min(n, len(p), len(s.data))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	if s.eofWithData && len(s.data) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nccc"), []byte{1, 2, 3}, uint8(2), uint8(0), false)
	f.Add([]byte("{\"a\":1}\n{\"b\":\"xxxxxxxxxxxxxxxx\"}\r\n\r\n"), []byte{7}, uint8(10), uint8(3), true)
	f.Add([]byte("abcd\r\nabcde\r\n\r"), []byte{}, uint8(4), uint8(1), false)
	f.Add([]byte(""), []byte{0}, uint8(0), uint8(0), false)
	f.Fuzz(func(t *testing.T, data, sizes []byte, max, bufSize uint8, eofWithData bool) {
		size := int(bufSize)%64 + 1
		if bufSize >= 192 {
			size = defaultBufSize
		}
		src := &splitReader{data: data, sizes: sizes, eofWithData: eofWithData}
		r := newReaderSize(src, int(max), size)
		got, err := readAll(t, r)
		if err != io.EOF {
			t.Fatalf("ReadLine() error = %v, want io.EOF", err)
		}
		if want := reference(data, int(max)); !equalItems(got, want) {
			t.Fatalf("lines = %v\nwant %v", got, want)
		}
	})
}
