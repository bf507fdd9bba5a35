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
	turn := func(prompt, text string, ok bool) golden.TurnWant {
		return golden.TurnWant{SessionTurn: golden.SessionTurn{Prompt: prompt}, Text: text, Success: ok}
	}
	interrupted := func(prompt, text string) golden.TurnWant {
		return golden.TurnWant{SessionTurn: golden.SessionTurn{Prompt: prompt, Interrupted: true}, Text: text}
	}
	golden.SessionCaptures(t, backend{}.NewSessionProtocol, []golden.SessionWant{
		{File: "turn.jsonl", SessionID: "99562526-cf07-4d0a-bc5a-7d3d7dc3c378",
			Turns: []golden.TurnWant{turn("say hi", "hi there friend", true)}},
		{File: "interrupt-stream.jsonl", SessionID: "296ed9e3-b5a0-45d1-bf4e-ede6a56eebf9",
			Turns: []golden.TurnWant{interrupted("stall", "partial words "), turn("and now", "after interrupt", true)}},
		{File: "interrupt-tool.jsonl", SessionID: "ae955ba7-4f72-4ba5-ab2d-e0fd47075a48",
			Turns: []golden.TurnWant{interrupted("follow", ""), turn("and now", "after tool", true)}},
	})
}
