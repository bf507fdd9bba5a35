package fakeagent

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the fake agent when the test binary is re-executed as one,
// and fails the run if a fake's process or a goroutine outlives the tests.
func TestMain(m *testing.M) {
	Main()
	goleak.VerifyTestMain(CheckOrphans(m))
}
