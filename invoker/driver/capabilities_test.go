package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// wrapper embeds only the Invoker interface, as a user's middleware might.
type wrapper struct{ invoker.Invoker }

// A wrapper that embeds the Invoker interface, as a user's middleware
// does, keeps the capabilities and the sessions of the Invoker it wraps:
// both are part of the interface.
func TestWrapperKeepsCapabilitiesAndSessions(t *testing.T) {
	inv := driver.New(testBackend{})
	var w invoker.Invoker = wrapper{inv}
	if c, want := w.Capabilities(), inv.Capabilities(); c != want || !c.Images || !c.SystemPrompt {
		t.Errorf("wrapper.Capabilities() = %v, want the backend's declaration %v", c, want)
	}
	// testBackend declares no session mode: the wrapper reaches the
	// engine's OpenSession, which says so, naming the CLI.
	_, err := w.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir()})
	if !errors.Is(err, invoker.ErrUnsupported) || !strings.HasPrefix(err.Error(), testBackend{}.Name()+": ") {
		t.Errorf("wrapper.OpenSession() error = %v, want the engine's ErrUnsupported", err)
	}
}

// A field the CLI cannot honour is refused with an error that matches
// invoker.ErrUnsupported, errors.ErrUnsupported and ErrInvalidRequest.
func TestUnsupportedMatchesTheStandardSentinel(t *testing.T) {
	if !errors.Is(invoker.ErrUnsupported, errors.ErrUnsupported) {
		t.Errorf("errors.Is(invoker.ErrUnsupported, errors.ErrUnsupported) = false, want true")
	}
	err := driver.Unsupported("Images", "reference the file in the prompt")
	for _, target := range []error{invoker.ErrUnsupported, errors.ErrUnsupported, invoker.ErrInvalidRequest} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(Unsupported(...), %v) = false, want true", target)
		}
	}
	inv := driver.New(noImages{testBackend{}}, invoker.Options{Binary: "/nonexistent/never-started"})
	_, err = inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Images: []string{"/x.png"}})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "Request.Images") {
		t.Errorf("Invoke() with Images error = %v, want errors.ErrUnsupported naming Request.Images", err)
	}
}

// noImages is a backend whose CLI takes no images.
type noImages struct{ testBackend }

func (noImages) Capabilities() invoker.Capabilities { return invoker.Capabilities{Model: true} }
