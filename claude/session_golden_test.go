package claude

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
)

// The stream-json sessions of the real Claude Code 2.1.197, recorded by
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
		{File: "turn.jsonl", SessionID: "3a15fe28-a9d3-4cd0-bca2-e1722c5398a8",
			Turns: []golden.TurnWant{turn("say hi", "hi there friend", true)}},
		{File: "interrupt-stream.jsonl", SessionID: "21ae1d77-4e13-4b55-b396-991ee09b4546",
			Turns: []golden.TurnWant{interrupted("stall", "partial words "), turn("and now", "after interrupt", true)}},
		{File: "interrupt-tool.jsonl", SessionID: "4b303a38-8f5a-4a67-93dd-a1872af8d347",
			Turns: []golden.TurnWant{interrupted("follow", ""), turn("and now", "after tool", true)}},
	})
}
