package invoker_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

func TestCapabilities(t *testing.T) {
	c := invoker.Capabilities{Model: true, SystemPrompt: true}
	for _, tt := range []struct {
		field string
		want  bool
	}{
		{"Prompt", true}, {"Workdir", true}, {"Permission", true}, {"Env", true},
		{"Model", true}, {"SystemPrompt", true},
		{"SessionID", false}, {"Images", false}, {"NoSuchField", false},
		{"OutputSchema", false}, {"MaxTurns", false}, {"MaxBudgetUSD", false}, {"MaxBudget", false},
	} {
		if got := c.Supports(tt.field); got != tt.want {
			t.Errorf("Supports(%q) = %v, want %v", tt.field, got, tt.want)
		}
	}
	if got, want := c.Unsupported(), []string{"SessionID", "Fork", "Deltas", "Images", "OutputSchema", "MaxTurns", "MaxBudgetUSD", "Approve", "MCPServers"}; !slices.Equal(got, want) {
		t.Errorf("Unsupported() = %q, want %q", got, want)
	}
	if got, want := c.String(), "Capabilities{Model SystemPrompt}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	c.Resume, c.Sessions, c.Containment = true, true, "cgroup"
	if got, want := c.String(), "Capabilities{Model Resume SystemPrompt Sessions}"; got != want {
		t.Errorf("String() = %q, want %q: Resume and Sessions by their names", got, want)
	}
	c.Deltas, c.Steer, c.SwitchModel = true, true, true
	if got, want := c.String(), "Capabilities{Model Resume SystemPrompt Deltas Sessions Steer SwitchModel}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	c.Approve, c.GoTools = true, true
	if got, want := c.String(), "Capabilities{Model Resume SystemPrompt Deltas Approve GoTools Sessions Steer SwitchModel}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if !c.Supports("Approve") || c.Supports("MCPServers") || c.Supports("GoTools") {
		t.Errorf("Supports: Approve %v, MCPServers %v, GoTools %v; want true, false, false (GoTools is part of a field)", c.Supports("Approve"), c.Supports("MCPServers"), c.Supports("GoTools"))
	}
	if !c.Supports("Deltas") || c.Supports("Fork") || c.Supports("Steer") {
		t.Errorf("Supports: Deltas %v, Fork %v, Steer %v; want true, false, false (Steer is no Request field)", c.Supports("Deltas"), c.Supports("Fork"), c.Supports("Steer"))
	}
}

// Each optional field Unsupported names is a field of Request, which the
// engine finds by that name, and every other field of Request is one
// every CLI honours.
func TestCapabilitiesNameRequestFields(t *testing.T) {
	optional := (invoker.Capabilities{}).Unsupported()
	always := []string{"Prompt", "Workdir", "Permission", "Env", "ExtraArgs", "OnEvent", "Limits", "Sandbox"}
	rt := reflect.TypeFor[invoker.Request]()
	for _, name := range optional {
		if _, ok := rt.FieldByName(name); !ok {
			t.Errorf("Unsupported() names %q, which is no field of Request", name)
		}
	}
	for f := range rt.Fields() {
		if !slices.Contains(optional, f.Name) && !slices.Contains(always, f.Name) {
			t.Errorf("Request.%s is neither optional (a capability) nor one every CLI honours", f.Name)
		}
		if got := (invoker.Capabilities{}).Supports(f.Name); got == slices.Contains(optional, f.Name) {
			t.Errorf("Capabilities{}.Supports(%q) = %v", f.Name, got)
		}
	}
}
