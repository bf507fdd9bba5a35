package claude

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
)

// The stream-json sessions of the real Claude Code 2.1.197 (opened with
// the initialize control request), recorded by
// e2e's TestCaptureSessions (testdata/session), replayed through the
// session protocol: the lines it writes must be those the CLI was sent,
// and each turn must end where the CLI ended it, with its outcome.
func TestSessionCaptures(t *testing.T) {
	golden.SessionCaptures(t, backend{}.NewSessionProtocol, []golden.SessionWant{
		{File: "turn.jsonl", SessionID: "99562526-cf07-4d0a-bc5a-7d3d7dc3c378",
			Turns: []golden.TurnWant{golden.Turn("say hi", "hi there friend", true)}},
		{File: "interrupt-stream.jsonl", SessionID: "296ed9e3-b5a0-45d1-bf4e-ede6a56eebf9",
			Turns: []golden.TurnWant{golden.Interrupted("stall", "partial words "), golden.Turn("and now", "after interrupt", true)}},
		{File: "interrupt-tool.jsonl", SessionID: "ae955ba7-4f72-4ba5-ab2d-e0fd47075a48",
			Turns: []golden.TurnWant{golden.Interrupted("follow", ""), golden.Turn("and now", "after tool", true)}},
	})
}
