package main

// -fake-agent: the server tried with no CLI, no key and no network. Each
// served CLI is a scripted stand-in (invokertest.Agent) that speaks the
// CLI's own stream: it reports a session, runs a shell tool (echo hello),
// streams progress for two seconds (long enough to cancel the call and
// watch its tree go), then answers in a few chunks. The stand-in is this
// program, started again with standInVar set: main then calls
// invokertest.RunAgent, and only then, so that a server that inherited
// the variables of an Agent (a test that hands them to the CLI through
// the server's environment) is still the server.

import (
	"fmt"
	"os"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// fakeProgress is how long a stand-in streams progress before it answers.
const fakeProgress = 2 * time.Second

// standInVar marks the environment of the stand-ins this server starts.
const standInVar = "CLINVOKE_MCPSERVER_STAND_IN"

// fakeAgent returns opts with the binary and environment of the scripted
// stand-in for cli.
func fakeAgent(cli string, opts invoker.Options) (invoker.Options, error) {
	exe, err := os.Executable()
	if err != nil {
		return opts, fmt.Errorf("-fake-agent: the stand-in agent is this program, started again, and its path is unknown: %w", err)
	}
	a := invokertest.Agent{
		CLI:      cli,
		Answer:   fmt.Sprintf("A scripted answer of the stand-in for %s (-fake-agent): no model was asked. Drop -fake-agent to run the real CLI.", cli),
		Chunks:   3,
		Tool:     true,
		Progress: fakeProgress,
	}
	opts.Binary = exe
	opts.Env = append(opts.Env, a.Options().Env...)
	opts.Env = append(opts.Env, standInVar+"=1")
	return opts, nil
}
