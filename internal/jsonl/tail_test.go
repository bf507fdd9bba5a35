package jsonl

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{"nothing", 10, nil, ""},
		{"empty writes", 10, []string{"", ""}, ""},
		{"fits", 10, []string{"ab\n", "cd"}, "ab\ncd"},
		{"exactly n", 6, []string{"ab\n", "cd\n"}, "ab\ncd\n"},
		{"cut mid-line", 8, []string{"line1\nline2\nline3\n"}, "…\nline3\n"},
		{"cut just after newline", 12, []string{"line1\nline2\nline3\n"}, "…\nline2\nline3\n"},
		{"cut just before newline", 13, []string{"line1\nline2\nline3\n"}, "…\nline2\nline3\n"},
		{"wraparound over many writes", 8, []string{"aaa\n", "bbb\n", "ccc\n", "dd", "d\n", "eee"}, "…\nddd\neee"},
		{"write longer than n", 5, []string{"x\n", "0123456789\nabc"}, "…\nabc"},
		{"one long line", 5, []string{"0123456789"}, "…56789"},
		{"only a final newline kept", 5, []string{"0123456789\n"}, "…6789\n"},
		{"zero size", 0, []string{"abc"}, "…"},
		{"invalid UTF-8", 10, []string{"a\xffb\xfe\xfd\n"}, "a\uFFFDb\uFFFD\n"},
		{"rune split by the cut", 5, []string{"ab€€"}, "…€"}, // "€" is 3 bytes: the cut leaves 2 of the first
		{"rune being written", 10, []string{"ab\xe2\x82"}, "ab\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := NewTail(tt.n)
			var total int64
			for _, w := range tt.writes {
				n, err := tl.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
				total += int64(len(w))
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := tl.Len(); got != total {
				t.Errorf("Len() = %d, want %d", got, total)
			}
		})
	}
}

// TestTailMatchesSuffix writes the same input in pieces of every size and
// checks that the kept bytes are always the input's suffix.
func TestTailMatchesSuffix(t *testing.T) {
	var in bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&in, "stderr line %d %s\n", i, strings.Repeat("é", i%7))
	}
	data := in.Bytes()
	for _, n := range []int{1, 7, 64, 1000, len(data), len(data) + 10} {
		for _, piece := range []int{1, 3, 50, 999, len(data)} {
			tl := NewTail(n)
			for rest := data; len(rest) > 0; {
				k := min(piece, len(rest))
				tl.Write(rest[:k])
				rest = rest[k:]
			}
			kept := tl.buf[tl.start:]
			kept = append(kept[:len(kept):len(kept)], tl.buf[:tl.start]...)
			wantKept := data[max(0, len(data)-n-1):]
			if !bytes.Equal(kept, wantKept) {
				t.Errorf("n=%d piece=%d: kept %q, want %q", n, piece, kept, wantKept)
			}
			if cap(tl.buf) > n+1 {
				t.Errorf("n=%d piece=%d: ring capacity %d, want at most %d", n, piece, cap(tl.buf), n+1)
			}
			s := tl.String()
			if !utf8.ValidString(s) || len(s) > n+len("…\n") {
				t.Errorf("n=%d piece=%d: String() = %q: invalid UTF-8 or longer than n+4", n, piece, s)
			}
			if n >= 64 && n < len(data) && !strings.HasPrefix(s, "…\n") {
				t.Errorf("n=%d piece=%d: String() = %q, want it to start at a line after \"…\\n\"", n, piece, s)
			}
		}
	}
}

func TestTailConcurrent(t *testing.T) {
	const writers, lines = 8, 500
	tl := NewTail(1000)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(tl, "writer %d line %04d\n", w, i)
				if i%50 == 0 {
					_ = tl.String()
					_ = tl.Len()
				}
			}
		})
	}
	wg.Wait()
	const lineLen = len("writer 0 line 0000\n")
	if got, want := tl.Len(), int64(writers*lines*lineLen); got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
	// Each Write is atomic, so every kept line after the marker is whole.
	s := tl.String()
	body, ok := strings.CutPrefix(s, "…\n")
	if !ok {
		t.Fatalf("String() = %q, want it to start with \"…\\n\"", s)
	}
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		var w, i int
		if n, err := fmt.Sscanf(l, "writer %d line %d", &w, &i); n != 2 || err != nil || len(l)+1 != lineLen {
			t.Errorf("kept line %q is not a whole line", l)
		}
	}
}

func TestNewTailNegative(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewTail(-1) did not panic")
		}
	}()
	NewTail(-1)
}
