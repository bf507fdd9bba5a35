package driver

// What the backends' decoders share for the lines of a CLI's JSONL stream
// that are not the events they expect: a warning for a malformed line, a
// readable preview of it, and raw JSON that is kept only when valid, so
// that an invoker.Event can always be marshalled.

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// Malformed returns the warning for a stdout line that err says is not a
// JSON event. Raw keeps the line only when it is valid JSON (a non-object),
// so that the Event can always be marshalled; the text shows the start of
// the line.
func Malformed(line []byte, err error) invoker.Event {
	ev := invoker.Event{Kind: invoker.KindWarning}
	var syn *json.SyntaxError
	if !errors.As(err, &syn) && json.Valid(line) {
		ev.Raw = json.RawMessage(line)
		ev.Text = "unexpected JSON value on stdout: " + err.Error()
		return ev
	}
	ev.Text = "not a JSON event on stdout: " + preview(line)
	return ev
}

// preview returns the first 200 bytes of b as valid UTF-8, for a message.
func preview(b []byte) string {
	const max = 200
	s := strings.ToValidUTF8(string(b[:min(len(b), max)]), "\uFFFD")
	if len(b) > max {
		s += "..."
	}
	return s
}

// ValidJSON returns raw if it is valid JSON, else nil: what a decoder
// keeps in Event.Raw or Tool.Input.
func ValidJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		return nil
	}
	return raw
}
