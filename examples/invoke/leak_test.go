package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the interactive tests run the test binary as the CLI
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}
