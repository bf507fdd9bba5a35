//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

// TestMain lets the test binary serve as the fake agent CLI that the host
// tests put under the MCP server (fakeagent.Main exits when the
// environment asks for the fake) and as the shell of their terminal
// (jobShell), and fails the run if a fake it started
// is still alive at the end, or a goroutine leaked.
func TestMain(m *testing.M) {
	if os.Getenv(envJobShell) != "" {
		os.Exit(jobShell())
	}
	if os.Getenv(captureEnv) == "proxy" {
		os.Exit(captureProxy())
	}
	fakeagent.Main()
	code := fakeagent.CheckOrphans(m).Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildDir  string // holds the binaries built for the run; removed by TestMain
	serverBin string
	buildErr  error
)

// mcpServer returns the path of examples/mcpserver, built once per test
// binary: the hosts start it as a user's configuration does.
func mcpServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "clinvoke-e2e-")
		if buildErr != nil {
			return
		}
		serverBin = filepath.Join(buildDir, "mcpserver")
		out, err := exec.Command("go", "build", "-o", serverBin, "github.com/clinvoke/clinvoke/examples/mcpserver").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: out}
		}
	})
	if buildErr != nil {
		t.Fatalf("building examples/mcpserver: %v", buildErr)
	}
	return serverBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }
