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

// claims is testBackend claiming a long-lived mode and steering in its
// Capabilities, without the interfaces that carry them.
type claims struct{ testBackend }

func (claims) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Sessions: true, Steer: true}
}

// A capability that is not a Request field is the backend's interface,
// and nothing else: Capabilities reports Sessions for a SessionBackend and
// Steer for a Steerer, whatever the Capabilities the backend returns say,
// and OpenSession and Steer act on the same fact.
func TestCapabilitiesAreTheInterfaces(t *testing.T) {
	for _, tc := range []struct {
		name            string
		b               driver.Backend
		sessions, steer bool
	}{
		{"claims without the interfaces", claims{}, false, false},
		{"a SessionBackend that does not steer", echoBackend{}, true, false},
		{"a Steerer", live, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := driver.New(tc.b, invoker.Options{Binary: "cat"})
			c := inv.Capabilities()
			if c.Sessions != tc.sessions || c.Steer != tc.steer {
				t.Fatalf("Capabilities() = %v, want Sessions %v and Steer %v", c, tc.sessions, tc.steer)
			}
			s, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir()})
			if !tc.sessions {
				if !errors.Is(err, invoker.ErrUnsupported) {
					t.Errorf("OpenSession() error = %v, want ErrUnsupported", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			defer s.Close()
			// Between turns a steerable session refuses the steer as an
			// invalid request, one that cannot steer as unsupported.
			err = s.Steer(context.Background(), "hi")
			if got := errors.Is(err, invoker.ErrUnsupported); got == tc.steer {
				t.Errorf("Steer() error = %v, want ErrUnsupported: %v", err, !tc.steer)
			}
		})
	}
}
