package invoker_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/clinvoke/clinvoke/internal/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// A backend without a long-lived mode refuses to open a session before
// anything starts, with an error that says what to do instead.
func TestOpenSessionUnsupported(t *testing.T) {
	s := fakeagent.Script{RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := invoker.New(testBackend{}, invoker.WithBinary(os.Args[0]))
	if caps, _ := invoker.CapabilitiesOf(inv); caps.Sessions {
		t.Fatalf("test backend reports Sessions")
	}
	sess, err := invoker.OpenSession(context.Background(), inv, invoker.Request{Workdir: t.TempDir(), Env: s.Env()})
	if !errors.Is(err, invoker.ErrUnsupported) || sess != nil {
		t.Fatalf("OpenSession() = %v, %v; want nil and ErrUnsupported", sess, err)
	}
	var ie *invoker.Error
	if !errors.As(err, &ie) || ie.CLI != "fake" {
		t.Errorf("OpenSession() error = %v, want an *invoker.Error naming the CLI", err)
	}
	if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil && len(rec.Procs) > 0 {
		t.Errorf("a refused session started processes: %v", rec.Procs)
	}
}

// An Invoker that is not a Sessioner (a wrapper) is refused the same way.
func TestOpenSessionNotSessioner(t *testing.T) {
	inv := struct{ invoker.Invoker }{invoker.New(testBackend{})}
	if _, err := invoker.OpenSession(context.Background(), inv, invoker.Request{Workdir: t.TempDir()}); !errors.Is(err, invoker.ErrUnsupported) {
		t.Errorf("OpenSession() error = %v, want ErrUnsupported", err)
	}
}
