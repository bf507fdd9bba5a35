// Package schematype checks the type names of a JSON Schema, which
// jsonschema-go's Resolve leaves unchecked: a schema such as
// {"type":"objekt"} resolves, and the model's API then refuses every
// request that carries it. The engine checks Request.OutputSchema with it,
// and internal/mcphost the input schemas of Go tools.
package schematype

import (
	"encoding/json"
	"fmt"
)

// Names are the type names of JSON Schema.
const Names = "null, boolean, object, array, number, string, integer"

// Unknown returns the first "type" value in schema (JSON), or in any of its
// subschemas, that is not a JSON Schema type, and false; or "", true when
// there is none, or schema is not JSON. Keywords whose values are data,
// not schemas (enum, const, default, examples), are not entered.
func Unknown(schema []byte) (string, bool) {
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return "", true
	}
	return unknown(v)
}

func unknown(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			switch k {
			case "enum", "const", "default", "examples":
				continue
			case "type":
				var types []any
				switch t := sub.(type) {
				case string:
					types = []any{t}
				case []any:
					types = t
				}
				for _, t := range types {
					if name, _ := t.(string); !known(name) {
						return fmt.Sprint(t), false
					}
				}
				if types != nil {
					continue
				}
			}
			if typ, ok := unknown(sub); !ok {
				return typ, false
			}
		}
	case []any:
		for _, sub := range v {
			if typ, ok := unknown(sub); !ok {
				return typ, false
			}
		}
	}
	return "", true
}

func known(name string) bool {
	switch name {
	case "null", "boolean", "object", "array", "number", "string", "integer":
		return true
	}
	return false
}
