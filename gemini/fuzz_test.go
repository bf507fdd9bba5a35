package gemini

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// FuzzDecode feeds arbitrary lines to a decoder: it must never panic, must
// return at least one event per line, and its events must always marshal.
func FuzzDecode(f *testing.F) {
	golden.Fuzz(f, func() driver.Decoder { return newDecoder() }, func(line []byte) bool { return stallSignature(line) != nil },
		`{"type":"tool_result","tool_id":"x","status":"error","error":null}`,
		`{"type":"result","status":"error","error":null,"stats":null}`,
		`Waiting for authentication...`,
	)
}
