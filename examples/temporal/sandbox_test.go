package agentflow_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clinvoke/clinvoke/claude"
	agentflow "github.com/clinvoke/clinvoke/examples/temporal"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// SandboxOf reads the worker's -sandbox and -network flags: the mode as
// given, the comma-separated rules (nil when empty), and an error naming
// the fix for an unknown mode or rules without a sandbox.
func TestSandboxOf(t *testing.T) {
	tests := []struct {
		mode, network string
		want          invoker.Sandbox
		wantErr       bool
	}{
		{mode: agentflow.DefaultSandbox, want: invoker.Sandbox{Mode: "available"}},
		{mode: "required", network: " none ", want: invoker.Sandbox{Mode: "required", Network: []string{"none"}}},
		{mode: "available", network: "a.example, *.b.example:443,", want: invoker.Sandbox{Mode: "available", Network: []string{"a.example", "*.b.example:443"}}},
		{mode: "off", want: invoker.Sandbox{Mode: "off"}},
		{mode: "off", network: "none", wantErr: true},
		{mode: "", wantErr: true},
		{mode: "strict", wantErr: true},
	}
	for _, tt := range tests {
		got, err := agentflow.SandboxOf(tt.mode, tt.network)
		if tt.wantErr {
			if err == nil {
				t.Errorf("SandboxOf(%q, %q) = %+v, want an error", tt.mode, tt.network, got)
			}
			continue
		}
		if err != nil || got.Mode != tt.want.Mode || !slices.Equal(got.Network, tt.want.Network) {
			t.Errorf("SandboxOf(%q, %q) = %+v, %v, want %+v", tt.mode, tt.network, got, err, tt.want)
		}
	}
}

// A turn of an Invoker made with the worker's default sandbox runs under
// the sandbox where the host holds one, and says so in its output.
func TestRunTurnSandboxed(t *testing.T) {
	noLeaks(t)
	sb, err := agentflow.SandboxOf(agentflow.DefaultSandbox, "")
	require.NoError(t, err)
	opts := invokertest.Agent{CLI: "claude", Answer: "held"}.Options()
	opts.Sandbox = sb
	inv := claude.New(opts)
	a := &agentflow.Activities{Invokers: map[string]invoker.Invoker{"claude": inv}, HeartbeatEvery: 20 * time.Millisecond, Worker: "test-worker"}

	env := suite().NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	agentflow.Register(env, a)
	out := runOneTurn(t, env)
	require.Equal(t, "held", out.Text)
	want := ""
	if inv.Capabilities().Sandbox != "" {
		want = "filesystem"
	}
	t.Logf("the turn ran under the sandbox %q", out.Sandbox)
	require.Equal(t, want, out.Sandbox, "the turn's sandbox (host: %q)", inv.Capabilities().SandboxNote)
}
