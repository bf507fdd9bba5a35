package claude

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecode decodes every captured stream in testdata/*.stdout, each
// with a fresh decoder, and reports the throughput in MB/s.
func BenchmarkDecode(b *testing.B) {
	b.Run("claude", func(b *testing.B) {
		files, err := filepath.Glob(filepath.Join("testdata", "*.stdout"))
		if err != nil || len(files) == 0 {
			b.Fatalf("no captured streams: %v", err)
		}
		var streams [][][]byte
		var size int64
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			size += int64(len(data))
			var lines [][]byte
			for line := range bytes.Lines(data) {
				if line = bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(line)) > 0 {
					lines = append(lines, line)
				}
			}
			streams = append(streams, lines)
		}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, lines := range streams {
				d := newDecoder()
				for _, line := range lines {
					// The decoder may keep line as Raw but never writes
					// to it, so the lines serve every iteration. An error
					// (a fatal signature) is part of some samples.
					d.Decode(line)
				}
				d.Outcome(0, "")
			}
		}
	})
}
