//go:build unix

package driver_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// A CLI killed by a signal the run did not send (the OOM killer, an
// operator) is an *ExitError that names the signal.
func TestExitErrorNamesTheSignal(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Chunks: 2, StallFor: time.Minute}, fastLadder...)
	killed := false
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind != invoker.KindMessage || killed {
			return
		}
		killed = true
		if err := syscall.Kill(f.record().Pid("agent"), syscall.SIGKILL); err != nil {
			t.Errorf("kill: %v", err)
		}
	}
	res, err := f.inv.Invoke(context.Background(), f.req)
	var ee *invoker.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Invoke() error = %v, want an *ExitError", err)
	}
	if ee.ExitCode != -1 || ee.Signal != "SIGKILL" || res.ExitCode != -1 {
		t.Errorf("ExitError = {ExitCode:%d Signal:%q}, Result.ExitCode = %d; want -1, SIGKILL, -1", ee.ExitCode, ee.Signal, res.ExitCode)
	}
	if !strings.Contains(err.Error(), "killed by signal SIGKILL") {
		t.Errorf("Invoke() error = %q, want it to name the signal", err)
	}
	f.assertReaped(1)
}
