package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/clinvoke/clinvoke/internal/schematype"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/google/jsonschema-go/jsonschema"
)

// Structured answers and limits: Request.OutputSchema, MaxTurns and
// MaxBudgetUSD are checked before anything starts; after a successful turn
// the answer is checked against the schema, whatever the CLI guarantees
// (Codex does not check its answer at all: docs/structured-output.md).

// compileSchema checks Request.OutputSchema, MaxTurns and MaxBudgetUSD and
// returns the resolved schema, or nil when the Request sets none. Its
// errors match ErrInvalidRequest and name the field.
func compileSchema(req *invoker.SessionRequest) (*jsonschema.Resolved, error) {
	if req.MaxTurns < 0 {
		return nil, invalid("Request.MaxTurns is %d: give a positive number of turns, or 0 for the CLI's default", req.MaxTurns)
	}
	if b := req.MaxBudgetUSD; b < 0 || math.IsInf(b, 0) || math.IsNaN(b) {
		return nil, invalid("Request.MaxBudgetUSD is %v: give a positive amount in US dollars, or 0 for no limit", b)
	}
	if len(req.OutputSchema) == 0 {
		return nil, nil
	}
	raw := bytes.TrimSpace(req.OutputSchema)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid("Request.OutputSchema must be a JSON Schema object, such as {\"type\":\"object\",\"properties\":{...}}")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalid("Request.OutputSchema is not a valid JSON Schema: %v", err)
	}
	if typ, ok := schematype.Unknown(raw); !ok {
		// Resolve accepts any string as a type; the model's API does not.
		return nil, invalid("Request.OutputSchema is not a valid JSON Schema: type %q is not a JSON type (%s)", typ, schematype.Names)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, invalid("Request.OutputSchema is not a valid JSON Schema: %v", err)
	}
	return rs, nil
}

// structured returns the answer of a successful turn as JSON checked
// against schema: out.Structured when the CLI reported one, else its text.
// It returns nil, nil when the Request set no schema.
func structured(schema *jsonschema.Resolved, out *Outcome) (json.RawMessage, error) {
	if schema == nil {
		return nil, nil
	}
	answer := out.Structured
	if len(bytes.TrimSpace(answer)) == 0 {
		answer = json.RawMessage(strings.TrimSpace(out.Text))
	}
	var v any
	if err := json.Unmarshal(answer, &v); err != nil {
		return nil, &invoker.SchemaError{Text: out.Text, Err: fmt.Errorf("the answer is not JSON: %w", err)}
	}
	if err := schema.Validate(v); err != nil {
		return nil, &invoker.SchemaError{Text: out.Text, Err: err}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, answer); err != nil {
		return nil, &invoker.SchemaError{Text: out.Text, Err: err}
	}
	return b.Bytes(), nil
}
