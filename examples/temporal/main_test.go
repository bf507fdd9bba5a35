package agentflow_test

import (
	"os"
	"testing"

	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// TestMain plays three parts: the fake agent (invokertest.Main returns only
// when the binary was not started as one), a worker of the end-to-end test
// (see workerMain), and the tests, after which it fails the binary if any
// agent survived.
func TestMain(m *testing.M) {
	if addr := os.Getenv(envWorker); addr != "" {
		os.Exit(workerMain(addr))
	}
	if spec := os.Getenv(envReplica); spec != "" {
		os.Exit(replicaMain(spec))
	}
	invokertest.Main(m)
}
