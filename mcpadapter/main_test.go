package mcpadapter_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the benchmarks run the test binary as the fake agent
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}
