package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

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
