package codex

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// BenchmarkDecode reports the decoder's throughput over the captured
// streams in testdata/*.stdout.
func BenchmarkDecode(b *testing.B) {
	b.Run("codex", func(b *testing.B) {
		golden.BenchmarkDecode(b, func() driver.Decoder { return newDecoder() })
	})
}
