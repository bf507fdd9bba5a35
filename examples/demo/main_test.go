package main

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // demo re-executes its own binary, here the test binary
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// The README's first command: for every CLI flavour, and once with an
// agent that ignores SIGINT and SIGTERM (the ladder's two seconds), the demo
// cancels a run and finds no survivor (demo returns an error if any process
// of the tree is alive after Invoke).
func TestDemo(t *testing.T) {
	tests := []struct {
		cli      string
		stubborn bool
	}{{"codex", false}, {"gemini", false}, {"claude", false}, {"claude", true}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/stubborn=%v", tt.cli, tt.stubborn), func(t *testing.T) {
			if err := demo(tt.cli, 300*time.Millisecond, tt.stubborn); err != nil {
				t.Errorf("demo(%s, stubborn=%v) = %v", tt.cli, tt.stubborn, err)
			}
		})
	}
}
