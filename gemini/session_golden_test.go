package gemini

import (
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/golden"
	"github.com/clinvoke/clinvoke/invoker"
)

// The ACP sessions of the real Gemini CLI 0.61.0, recorded by e2e's
// TestCaptureSessions (testdata/session), replayed through the session
// protocol: the lines it writes must be those the CLI was sent (the
// handshake, the mode of the permission, each session/prompt and
// session/cancel, the answer to a permission request), and each turn must
// end where the CLI ended it, with its outcome.
func TestSessionCaptures(t *testing.T) {
	readOnly := invoker.SessionRequest{Model: "gemini-2.5-pro"}
	// e2e's tool runs in yolo mode: the shell tool asks nothing there.
	unlimited := invoker.SessionRequest{Model: "gemini-2.5-pro", Permission: invoker.Unlimited}
	golden.SessionCaptures(t, backend{}.NewSessionProtocol, []golden.SessionWant{
		{File: "turn.jsonl", Request: readOnly, SessionID: "f2c650be-62b4-4ce3-878a-71557b769467",
			Turns: []golden.TurnWant{golden.Turn("say hi", "hi there friend", true)}},
		{File: "interrupt-stream.jsonl", Request: readOnly, SessionID: "4fab9ee5-08e2-480b-bc2d-1a880af7d96f",
			Turns: []golden.TurnWant{golden.Interrupted("stall", "partial words "), golden.Turn("and now", "after interrupt", true)}},
		{File: "interrupt-tool.jsonl", Request: unlimited, SessionID: "c8bf681c-336a-4011-b9e3-a6a26b37ba57",
			Turns: []golden.TurnWant{golden.Interrupted("follow", ""), golden.Turn("and now", "after tool", true)}},
		// A read-only session refuses the shell command Gemini asks
		// about; the model then answers without it.
		{File: "approval.jsonl", Request: readOnly, SessionID: "a6fcb277-c7c4-4f6e-bba2-ec852e40197f",
			Turns: []golden.TurnWant{golden.Turn("make a file", "not allowed then", true)}},
	})
}
