package driver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxErrorNamesTheFix: a required sandbox on a host without one
// fails with an error matching ErrSandbox that says what is missing and
// how to get it, or how to run without it.
func TestSandboxErrorNamesTheFix(t *testing.T) {
	err := error(&sandboxError{err: fmt.Errorf("%w: Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter", sandbox.ErrUnavailable)})
	if !errors.Is(err, invoker.ErrSandbox) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("%v does not match ErrSandbox and the cause", err)
	}
	want := "sandbox unavailable: Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter; or set Sandbox.Mode to \"available\""
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
}

// TestSandboxOverride: a request's non-zero fields replace the Options',
// its paths are appended, and Options merge the same way.
func TestSandboxOverride(t *testing.T) {
	base := invoker.Sandbox{Mode: "required", Hide: []string{"/a"}}
	got := overrideSandbox(base, invoker.Sandbox{Mode: "off", Hide: []string{"/b"}, Show: []string{"/c"}})
	if got.Mode != "off" || strings.Join(got.Hide, ",") != "/a,/b" || strings.Join(got.Show, ",") != "/c" {
		t.Errorf("overrideSandbox = %+v", got)
	}
	if got := overrideSandbox(base, invoker.Sandbox{}); got.Mode != "required" {
		t.Errorf("an empty request's Mode replaced the Options': %+v", got)
	}
	if len(base.Hide) != 1 {
		t.Errorf("overrideSandbox changed its base: %+v", base)
	}
	c := newConfig([]invoker.Options{{Sandbox: base}, {Sandbox: invoker.Sandbox{Show: []string{"/d"}}}})
	if c.sandbox.Mode != "required" || len(c.sandbox.Show) != 1 {
		t.Errorf("merged Options.Sandbox = %+v", c.sandbox)
	}
}
