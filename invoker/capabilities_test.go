package invoker_test

import (
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
	if got, want := c.Unsupported(), []string{"SessionID", "Images", "OutputSchema", "MaxTurns", "MaxBudgetUSD"}; !slices.Equal(got, want) {
		t.Errorf("Unsupported() = %q, want %q", got, want)
	}
	if got, want := c.String(), "Capabilities{Model SystemPrompt}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// wrapper embeds only the Invoker interface, as a user's middleware might.
type wrapper struct{ invoker.Invoker }

func TestCapabilitiesOf(t *testing.T) {
	inv := invoker.New(testBackend{})
	c, ok := invoker.CapabilitiesOf(inv)
	if !ok || !c.Images || !c.SystemPrompt {
		t.Errorf("CapabilitiesOf(engine) = %v, %v; want the backend's declaration and true", c, ok)
	}
	if c, ok := invoker.CapabilitiesOf(wrapper{inv}); ok || c != (invoker.Capabilities{}) {
		t.Errorf("CapabilitiesOf(wrapper) = %v, %v; want the zero value and false", c, ok)
	}
}
