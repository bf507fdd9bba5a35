package claude

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// FuzzDecode feeds arbitrary lines to a decoder: it must never panic, must
// return at least one event per line, and its events must always marshal.
func FuzzDecode(f *testing.F) {
	golden.Fuzz(f, func() driver.Decoder { return newDecoder() }, nil,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}}`,
		`{"type":"system","subtype":"api_retry","error":{"a":1},"error_status":"x"}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"result":null,"usage":null}`,
	)
}
