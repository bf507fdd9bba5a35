package driver

import (
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/invoker"
)

// decide is the part of a turn's verdict that both drivers share, so that
// the same output of the CLI gives the same outcome through Invoke and
// through Session.Turn. It weighs what the CLI reported about the turn
// (out), why the turn was stopped (stopErr, nil when it was not), the
// stdout lines skipped during it, and the schema its answer must satisfy;
// it fills res.Structured. Success needs the CLI's terminal success event
// and nothing skipped. done is false when none of that decides (the CLI
// neither ended the turn in its own terms nor was stopped), and the driver
// says what it knows instead: the exit status of a one-turn run, no result
// for a session's turn.
func decide(out *Outcome, stopErr error, skipped *lineTooLongError, schema *jsonschema.Resolved, res *invoker.Result) (err error, done bool) {
	switch {
	case out.Success && skipped == nil:
		// The CLI reported success before any stop took effect: the turn
		// is complete, and nothing of it is lost. Its answer must still
		// satisfy the OutputSchema, if one is set.
		res.Structured, err = structured(schema, out)
		return err, true
	case stopErr != nil:
		return stopErr, true
	case out.Err != nil:
		return out.Err, true
	case out.Success:
		// The terminal event came, but a line before it was skipped: it
		// may have held (part of) the answer, which is then lost.
		skipped.success = true
		return skipped, true
	}
	return nil, false
}
