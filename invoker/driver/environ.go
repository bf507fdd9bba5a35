package driver

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// MarkerVar is the environment variable that carries each run's unique
// marker. Every process of a run inherits it unless it clears its
// environment, which lets the engine find descendants that left the run's
// session (Linux).
const MarkerVar = "CLINVOKE_RUN"

// nestedBreakers are host variables that make a nested agent CLI fail: a
// host running under Claude Code has CLAUDECODE set, and a claude started
// by any agent's tool then refuses to start. They are never inherited.
var nestedBreakers = []string{"CLAUDECODE"}

// environ builds a run's environment: the host's (filtered by
// invoker.Options.InheritEnv, minus nestedBreakers and cmd.Unset), then
// the run's trace context (TRACEPARENT, TRACESTATE), invoker.Options.Env,
// the backend's variables, Request.Env and the run marker, later entries
// overriding earlier ones: a trace context the host inherited is replaced
// by the run's, and one the caller sets explicitly wins. An empty marker
// is left out, and so are the variables that make this program's binary
// run as a first stage or tell it what it runs with (sandbox.IsStageVar),
// whoever sets them: a first stage's spec is the engine's alone.
func environ(cfg *config, cmd *Command, reqEnv []string, marker string, trace []string) []string {
	var env envList
	keep := cfg.inheritEnv
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "" || envKey(k) == envKey(MarkerVar) || sandbox.IsStageVar(envKey(k)) || hasKey(nestedBreakers, k) || hasKey(cmd.Unset, k) {
			continue
		}
		if keep != nil && !keep(k) {
			continue
		}
		env.set(kv)
	}
	for _, list := range [][]string{trace, cfg.env, cmd.Env, reqEnv} {
		for _, kv := range list {
			if k, _, _ := strings.Cut(kv, "="); !sandbox.IsStageVar(envKey(k)) {
				env.set(kv)
			}
		}
	}
	if marker != "" {
		env.set(marker)
	}
	return env.list
}

// envList is an environment in which setting a key replaces its value in
// place.
type envList struct {
	list  []string
	index map[string]int
}

func (l *envList) set(kv string) {
	k, _, _ := strings.Cut(kv, "=")
	k = envKey(k)
	if l.index == nil {
		l.index = make(map[string]int, 64)
	}
	if i, ok := l.index[k]; ok {
		l.list[i] = kv
		return
	}
	l.index[k] = len(l.list)
	l.list = append(l.list, kv)
}

// hasKey reports whether names holds the variable name k.
func hasKey(names []string, k string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return envKey(n) == envKey(k) })
}

// envKey returns the form of an environment variable's name under which
// two names are the same variable: the name itself, or on Windows, where
// Path and PATH are one variable, its upper case.
func envKey(k string) string {
	if runtime.GOOS == "windows" {
		return strings.ToUpper(k)
	}
	return k
}

// newMarker returns a fresh KEY=VALUE marker for one run.
func newMarker() string {
	var b [12]byte
	rand.Read(b[:])
	return MarkerVar + "=" + hex.EncodeToString(b[:])
}
