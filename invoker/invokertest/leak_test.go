package invokertest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the Agents of the examples and tests are this binary
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}
