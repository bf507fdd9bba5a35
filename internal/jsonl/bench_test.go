package jsonl

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
)

// smallInput is about 4 MiB of JSON-like lines of 100 B to 4 KiB, the
// common case on an agent's stdout.
func smallInput() []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	var in bytes.Buffer
	for in.Len() < 4<<20 {
		n := 100 + rng.IntN(rng.IntN(4000)+1)
		fmt.Fprintf(&in, `{"type":"item.delta","text":"%s"}`+"\n", bigLine(n, uint64(in.Len())))
	}
	return in.Bytes()
}

// BenchmarkReadLineSmall and the two BenchmarkBufioScannerSmall baselines
// read the same lines. The Reader hands out caller-owned lines, so the fair
// baseline copies each token too (what a caller keeping json.RawMessage
// must do); the NoCopy variant is the lower bound.
func BenchmarkReadLineSmall(b *testing.B) {
	in := smallInput()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(in), 64<<20)
		for {
			_, err := r.ReadLine()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkBufioScannerSmall(b *testing.B) {
	benchScannerSmall(b, true)
}

func BenchmarkBufioScannerSmallNoCopy(b *testing.B) {
	benchScannerSmall(b, false)
}

var sink []byte

func benchScannerSmall(b *testing.B, copyLines bool) {
	in := smallInput()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(in))
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if copyLines {
				sink = bytes.Clone(sc.Bytes())
			}
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadLine64MiB reads one 64 MiB line and reports, per line:
// peak-extra-MiB, how far the heap grew while reading it (the collector is
// off, so nothing is freed meanwhile and this is the peak); and
// retained-MiB, what stays live after a collection while the line and the
// Reader are still referenced (the line itself: 64 MiB).
// BenchmarkBufioScanner64MiB measures the same for a bufio.Scanner whose
// buffer grows by doubling, plus the copy a caller must make.
func BenchmarkReadLine64MiB(b *testing.B) {
	benchHuge(b, func(in io.Reader) ([]byte, any) {
		r := NewReader(in, 64<<20)
		l, err := r.ReadLine()
		if err != nil || len(l) != 64<<20 {
			b.Fatalf("ReadLine() = %d bytes, %v", len(l), err)
		}
		return l, r
	})
}

func BenchmarkBufioScanner64MiB(b *testing.B) {
	benchHuge(b, func(in io.Reader) ([]byte, any) {
		sc := bufio.NewScanner(in)
		sc.Buffer(nil, 64<<20+1)
		if !sc.Scan() || len(sc.Bytes()) != 64<<20 {
			b.Fatalf("Scan() = %d bytes, %v", len(sc.Bytes()), sc.Err())
		}
		return bytes.Clone(sc.Bytes()), sc
	})
}

func benchHuge(b *testing.B, read func(io.Reader) ([]byte, any)) {
	in := append(bigLine(64<<20, 1), '\n')
	b.SetBytes(int64(len(in)))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const mib = 1 << 20
	var peak, retained float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var m0, m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		b.StartTimer()

		line, reader := read(bytes.NewReader(in))

		b.StopTimer()
		runtime.ReadMemStats(&m1)
		runtime.GC()
		runtime.ReadMemStats(&m2)
		runtime.KeepAlive(line)
		runtime.KeepAlive(reader)
		peak += float64(m1.HeapAlloc-m0.HeapAlloc) / mib
		retained += float64(m2.HeapAlloc-m0.HeapAlloc) / mib
		b.StartTimer()
	}
	b.ReportMetric(peak/float64(b.N), "peak-extra-MiB")
	b.ReportMetric(retained/float64(b.N), "retained-MiB")
}
