package invoker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Structured answers and limits: Request.OutputSchema, MaxTurns and
// MaxBudgetUSD are checked before anything starts; after a successful turn
// the answer is checked against the schema, whatever the CLI guarantees
// (Codex does not check its answer at all: docs/structured-output.md).

var (
	// ErrMaxTurns is matched by the *LimitError Invoke returns when the
	// CLI stopped because the turn reached its turn limit.
	ErrMaxTurns = errors.New("turn limit reached")

	// ErrMaxBudget is matched by the *LimitError Invoke returns when the
	// CLI stopped because the turn reached Request.MaxBudgetUSD.
	ErrMaxBudget = errors.New("budget limit reached")
)

// A LimitError reports that the CLI stopped the turn because it reached a
// limit: Request.MaxTurns or Request.MaxBudgetUSD (or, for Gemini, the
// model.maxSessionTurns of its own settings). Invoke returns it with the
// partial Result: the session id (resume the session, with a higher limit,
// to go on), the text so far, Turns and Usage, with the cost where the CLI
// reports one. It matches ErrMaxTurns or ErrMaxBudget, and unwraps to what
// the CLI reported (a *StreamError).
type LimitError struct {
	// Limit names the Request field of the limit reached: "MaxTurns" or
	// "MaxBudgetUSD".
	Limit string
	// SessionID is the session that reached the limit, or "" if the CLI
	// reported none.
	SessionID string
	// Err is the failure as the CLI reported it.
	Err error
}

// Error says which limit was reached and what the CLI reported.
func (e *LimitError) Error() string {
	what := "the turn limit (Request.MaxTurns) was reached"
	if e.Limit == "MaxBudgetUSD" {
		what = "the budget (Request.MaxBudgetUSD) was reached"
	}
	if e.SessionID != "" {
		what += "; resume session " + e.SessionID + " to continue"
	}
	if e.Err != nil {
		what += ": " + e.Err.Error()
	}
	return what
}

// Unwrap returns what the CLI reported.
func (e *LimitError) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of the limit reached:
// ErrMaxTurns or ErrMaxBudget.
func (e *LimitError) Is(target error) bool {
	switch e.Limit {
	case "MaxTurns":
		return target == ErrMaxTurns
	case "MaxBudgetUSD":
		return target == ErrMaxBudget
	}
	return false
}

// A SchemaError reports that a turn completed but its answer does not
// satisfy Request.OutputSchema: it is not JSON, or the JSON breaks the
// schema. Invoke returns it with the Result of the completed turn, whose
// Structured is nil and whose Text, like the error's, holds the answer as
// the CLI printed it.
type SchemaError struct {
	// Text is the answer as the CLI gave it.
	Text string
	// Err says why it does not satisfy the schema: a JSON syntax error or
	// the schema's validation error.
	Err error
}

// Error says why the answer does not satisfy the schema.
func (e *SchemaError) Error() string {
	return "the answer does not satisfy Request.OutputSchema: " + e.Err.Error()
}

// Unwrap returns the syntax or validation error.
func (e *SchemaError) Unwrap() error { return e.Err }

// compileSchema checks Request.OutputSchema, MaxTurns and MaxBudgetUSD and
// returns the resolved schema, or nil when the Request sets none. Its
// errors match ErrInvalidRequest and name the field.
func compileSchema(req *Request) (*jsonschema.Resolved, error) {
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
	if err := checkTypes(&s); err != nil {
		return nil, invalid("Request.OutputSchema is not a valid JSON Schema: %v", err)
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
		return nil, &SchemaError{Text: out.Text, Err: fmt.Errorf("the answer is not JSON: %w", err)}
	}
	if err := schema.Validate(v); err != nil {
		return nil, &SchemaError{Text: out.Text, Err: err}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, answer); err != nil {
		return nil, &SchemaError{Text: out.Text, Err: err}
	}
	return b.Bytes(), nil
}

// jsonTypes are the type names of JSON Schema.
var jsonTypes = map[string]bool{"null": true, "boolean": true, "object": true, "array": true, "number": true, "string": true, "integer": true}

// checkTypes reports a "type" that names no JSON type, in s or any of its
// subschemas: jsonschema-go's Resolve leaves that unchecked, and a schema
// such as {"type":"objekt"} would otherwise reach the CLI.
func checkTypes(s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !jsonTypes[t] {
			return fmt.Errorf("type %q is not a JSON type (null, boolean, object, array, number, string, integer)", t)
		}
	}
	// Walk every field that holds subschemas, whatever jsonschema-go
	// version adds.
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Type() {
		case schemaPtr:
			if err := checkTypes(f.Interface().(*jsonschema.Schema)); err != nil {
				return err
			}
		case reflect.SliceOf(schemaPtr):
			for _, c := range f.Interface().([]*jsonschema.Schema) {
				if err := checkTypes(c); err != nil {
					return err
				}
			}
		case reflect.MapOf(reflect.TypeFor[string](), schemaPtr):
			for _, c := range f.Interface().(map[string]*jsonschema.Schema) {
				if err := checkTypes(c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var schemaPtr = reflect.TypeFor[*jsonschema.Schema]()
