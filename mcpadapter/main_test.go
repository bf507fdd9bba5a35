package mcpadapter_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/fakeagent"
)

// TestMain runs the fake agent when the backend re-executes this binary as
// one, and fails the run if a fake's process or a goroutine outlives the
// tests.
func TestMain(m *testing.M) {
	fakeagent.Main()
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}
