package codex

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// FuzzDecode feeds arbitrary lines to a decoder: it must never panic, must
// return at least one event per line, and its events must always marshal.
func FuzzDecode(f *testing.F) {
	golden.Fuzz(f, func() driver.Decoder { return newDecoder() }, nil,
		`{"type":"item.completed","item":{"id":"x","type":"mcp_tool_call","arguments":{"a":[1,{}]},"result":{"content":[{"type":"text","text":"t"}]}}}`,
		`{"type":"item.completed","item":{"type":"todo_list","items":[{"text":"a","completed":true}]}}`,
		`{"type":"turn.failed","error":null}`,
	)
}
