package driver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// A backend without a long-lived mode refuses to open a session before
// anything starts, with an error that says what to do instead.
func TestOpenSessionUnsupported(t *testing.T) {
	s := fakeagent.Script{RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := driver.New(testBackend{}, invoker.Options{Binary: os.Args[0]})
	if caps := inv.Capabilities(); caps.Sessions {
		t.Fatalf("test backend reports Sessions")
	}
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
	if !errors.Is(err, invoker.ErrUnsupported) || sess != nil {
		t.Fatalf("OpenSession() = %v, %v; want nil and ErrUnsupported", sess, err)
	}
	if !strings.HasPrefix(err.Error(), "fake: ") {
		t.Errorf("OpenSession() error = %v, want it to name the CLI", err)
	}
	if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil && len(rec.Procs) > 0 {
		t.Errorf("a refused session started processes: %v", rec.Procs)
	}
}
