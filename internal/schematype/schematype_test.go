package schematype

import "testing"

func TestUnknown(t *testing.T) {
	for _, tt := range []struct {
		schema string
		want   string // "" for none
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{`{"type":"objekt"}`, "objekt"},
		{`{"type":["string","null"]}`, ""},
		{`{"type":["string","nul"]}`, "nul"},
		{`{"type":"object","properties":{"a":{"type":"strng"}}}`, "strng"},
		{`{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"int"}]}}`, "int"},
		{`{"type":"object","properties":{"a":{"enum":[{"type":"not a schema"}]}}}`, ""},
		{`{"type":"object","default":{"type":"data"},"examples":[{"type":"data"}],"const":{"type":"x"}}`, ""},
		{`{"type":"object","properties":{"type":{"type":"string"}}}`, ""},
		{`{"type":7}`, ""},
		{`not json`, ""},
	} {
		got, ok := Unknown([]byte(tt.schema))
		if got != tt.want || ok != (tt.want == "") {
			t.Errorf("Unknown(%s) = %q, %v; want %q", tt.schema, got, ok, tt.want)
		}
	}
}
