package invoker_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// TestRequestFieldsReachTheSession: a Request is a SessionRequest and a
// TurnRequest together. Every field of Request is a field of one of them,
// of the same type, but for the turn's own, listed here; and
// Request.Session, Request.Turn and SessionRequest.Request carry every
// field across, so that a field added to one struct and forgotten in a
// converter fails here.
func TestRequestFieldsReachTheSession(t *testing.T) {
	// The fields a Request has and a SessionRequest has not: a turn's.
	turnOnly := []string{"Prompt", "Images", "OnEvent"}
	// The fields a TurnRequest shares with the session: a turn may switch
	// the model and lower the permission.
	turnSwitches := []string{"Model", "Permission"}

	reqT, sessT, turnT := reflect.TypeFor[invoker.Request](), reflect.TypeFor[invoker.SessionRequest](), reflect.TypeFor[invoker.TurnRequest]()
	for f := range reqT.Fields() {
		sf, inSession := sessT.FieldByName(f.Name)
		tf, inTurn := turnT.FieldByName(f.Name)
		switch {
		case slices.Contains(turnOnly, f.Name):
			if inSession || !inTurn || tf.Type != f.Type {
				t.Errorf("Request.%s is a turn's field: want it in TurnRequest (same type) and not in SessionRequest", f.Name)
			}
		case !inSession || sf.Type != f.Type:
			t.Errorf("Request.%s (%s) has no field of the same name and type in SessionRequest: add it there, or list it as a turn's", f.Name, f.Type)
		case inTurn && !slices.Contains(turnSwitches, f.Name):
			t.Errorf("Request.%s is in both SessionRequest and TurnRequest: list it among the turn's switches", f.Name)
		}
	}
	for f := range sessT.Fields() {
		if _, ok := reqT.FieldByName(f.Name); !ok {
			t.Errorf("SessionRequest.%s has no field in Request: a one-turn run could not set it", f.Name)
		}
	}
	for f := range turnT.Fields() {
		if _, ok := reqT.FieldByName(f.Name); !ok {
			t.Errorf("TurnRequest.%s has no field in Request: a one-turn run could not set it", f.Name)
		}
	}

	// Every field set, carried through Session and Turn and back.
	var req invoker.Request
	v := reflect.ValueOf(&req).Elem()
	for i := range v.NumField() {
		fill(t, reqT.Field(i).Name, v.Field(i))
	}
	back := req.Session().Request(req.Turn())
	bv := reflect.ValueOf(back)
	for i := range v.NumField() {
		name := reqT.Field(i).Name
		if !same(v.Field(i), bv.Field(i)) {
			t.Errorf("Request.%s is lost on the way through Session, Turn and SessionRequest.Request: copy it in the converters", name)
		}
	}
}

// fill sets v to a value that is not its zero value.
func fill(t *testing.T, name string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + name)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, name, s.Index(0))
		v.Set(s)
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, v.Type().NumOut())
			for i := range out {
				out[i] = reflect.Zero(v.Type().Out(i))
			}
			return out
		}))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, name, v.Field(i))
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, name, p.Elem())
		v.Set(p)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, name, k)
		fill(t, name, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Uint8:
		v.SetUint(1)
	default:
		t.Fatalf("Request.%s: fill knows no %s: teach it", name, v.Kind())
	}
}

// same reports whether a and b hold the same value; funcs are the same
// when they are the same func.
func same(a, b reflect.Value) bool {
	if a.Kind() == reflect.Func {
		return a.Pointer() == b.Pointer()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
