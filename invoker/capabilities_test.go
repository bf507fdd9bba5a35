package invoker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
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

// A field the CLI cannot honour is refused with an error that matches
// invoker.ErrUnsupported, errors.ErrUnsupported and ErrInvalidRequest.
func TestUnsupportedMatchesTheStandardSentinel(t *testing.T) {
	if !errors.Is(invoker.ErrUnsupported, errors.ErrUnsupported) {
		t.Errorf("errors.Is(invoker.ErrUnsupported, errors.ErrUnsupported) = false, want true")
	}
	err := invoker.Unsupported("Images", "reference the file in the prompt")
	for _, target := range []error{invoker.ErrUnsupported, errors.ErrUnsupported, invoker.ErrInvalidRequest} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(Unsupported(...), %v) = false, want true", target)
		}
	}
	inv := invoker.New(noImages{testBackend{}}, invoker.WithBinary("/nonexistent/never-started"))
	_, err = inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Images: []string{"/x.png"}})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "Request.Images") {
		t.Errorf("Invoke() with Images error = %v, want errors.ErrUnsupported naming Request.Images", err)
	}
}

// noImages is a backend whose CLI takes no images.
type noImages struct{ testBackend }

func (noImages) Capabilities() invoker.Capabilities { return invoker.Capabilities{Model: true} }
