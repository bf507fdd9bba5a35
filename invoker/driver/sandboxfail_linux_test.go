//go:build linux

package driver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// TestSandboxLandlockUnavailable: on a host whose kernel gives no
// Landlock (the probe injected), Invoke and OpenSession with the
// "required" sandbox fail before anything starts with ErrSandbox naming
// what is missing and how to get it, Capabilities says the same, and
// "available" runs without the sandbox, as Result.Sandbox says. A bare
// errno (EPERM from a container's seccomp filter) gets its fix named too.
func TestSandboxLandlockUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe error
		fix   string
	}{
		{"not enabled", fmt.Errorf("%w: Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter", sandbox.ErrUnavailable), "lsm= boot parameter"},
		{"seccomp", sandbox.NameFix(fmt.Errorf("%w: Landlock: %w", sandbox.ErrUnavailable, syscall.EPERM)), "seccomp profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			driver.SetLandlockProbe(t, 0, tc.probe)
			lr := newLimitRun(t, fakeagent.Script{})
			if c := lr.inv.Capabilities(); c.Sandbox != "" || !strings.Contains(c.SandboxNote, tc.fix) {
				t.Errorf("Capabilities: Sandbox %q, SandboxNote %q; want none, and the fix %q", c.Sandbox, c.SandboxNote, tc.fix)
			}
			wantErr := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, invoker.ErrSandbox) || !strings.Contains(err.Error(), tc.fix) || !strings.Contains(err.Error(), `"available"`) {
					t.Errorf("%s: error = %v, want ErrSandbox naming %q and the \"available\" form", what, err, tc.fix)
				}
			}
			lr.req.Sandbox = invoker.Sandbox{Mode: "required"}
			res, err := lr.inv.Invoke(context.Background(), lr.req)
			wantErr("Invoke", err)
			if res != nil && res.ExitCode != -1 {
				t.Errorf("Invoke: ExitCode = %d, want -1: nothing started", res.ExitCode)
			}
			sreq := lr.req.Session()
			sreq.Sandbox = invoker.Sandbox{Mode: "required"}
			s, err := lr.inv.OpenSession(context.Background(), sreq)
			if s != nil {
				s.Close()
				t.Error("OpenSession returned a session")
			}
			wantErr("OpenSession", err)
			if runs, _ := os.ReadDir(lr.script.RecordDir); len(runs) != 0 {
				t.Errorf("the CLI ran (%d records), want nothing started", len(runs))
			}
			lr.req.Sandbox.Mode = "available"
			res, err = lr.inv.Invoke(context.Background(), lr.req)
			if err != nil {
				t.Fatalf("available: Invoke() error = %v", err)
			}
			if res.Sandbox != "" {
				t.Errorf("available: Result.Sandbox %q, want none held", res.Sandbox)
			}
			if runs, _ := os.ReadDir(lr.script.RecordDir); len(runs) == 0 {
				t.Error("available: the CLI did not run")
			}
		})
	}
}
