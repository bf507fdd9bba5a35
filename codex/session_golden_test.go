package codex

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
)

// The app-server sessions of the real Codex 0.169.0, recorded by e2e's
// TestCaptureSessions (testdata/session), replayed through the session
// protocol: the lines it writes must be those the CLI was sent (the
// handshake, each turn/start, turn/interrupt and the clean request after
// every turn), and each turn must end where the session ended it, with
// its outcome.
func TestSessionCaptures(t *testing.T) {
	// As e2e opens them: the model that sends the classic exec_command
	// tool, read-only.
	req := invoker.SessionRequest{Model: "gpt-5.5"}
	golden.SessionCaptures(t, backend{}.NewSessionProtocol, []golden.SessionWant{
		{File: "turn.jsonl", Request: req, SessionID: "01a21a5a-eac8-7eb3-b268-46603117a2c2",
			Turns: []golden.TurnWant{golden.Turn("say hi", "hi there friend", true)}},
		{File: "interrupt-stream.jsonl", Request: req, SessionID: "01a21a5a-ec84-7df2-9cf4-dfc12ca12c3b",
			Turns: []golden.TurnWant{golden.Interrupted("stall", "partial words "), golden.Turn("and now", "after interrupt", true)}},
		{File: "interrupt-tool.jsonl", Request: req, SessionID: "01a21a5a-ef5d-7e93-bcf8-e0f1ab387a11",
			Turns: []golden.TurnWant{golden.Interrupted("follow", ""), golden.Turn("and now", "after tool", true)}},
	})
}
