package sandbox

import "strings"

// NodeInspectorOff is the option a sandboxed run's NODE_OPTIONS gets: a
// module, given inline (nothing on disk for a command to rewrite or
// remove), that every node process of the run loads before its own code
// and that listens for SIGUSR1. With a listener the signal no longer opens
// node's inspector (127.0.0.1:9229), through which a command that may
// signal the CLI would run code inside it, in the CLI's Landlock domain.
// --import needs node 18.18 or 20.6 and later; --disable-sigusr1 is not
// used, as a node before 22.14 refuses to start with it.
const NodeInspectorOff = "--import=data:text/javascript,process.on('SIGUSR1',()=>{})"

// NodeOptionsVar is the variable that carries NodeInspectorOff to the
// node processes of a sandboxed run: the run's own, and a server's
// environment where its CLI starts it with one of its own.
const NodeOptionsVar = "NODE_OPTIONS"

// NodeOptions returns the NODE_OPTIONS of a sandboxed run whose
// environment has current as its value (empty when unset): the caller's
// options, kept, with NodeInspectorOff after them. It is not added again
// where it is current's last word already; anywhere else (inside a quoted
// value, say, where node does not read it as an option) it is added.
func NodeOptions(current string) string {
	if f := strings.Fields(current); len(f) > 0 && f[len(f)-1] == NodeInspectorOff {
		return current
	}
	return strings.TrimSpace(current + " " + NodeInspectorOff)
}

// NodeOptionsIn returns NodeOptions of env's NODE_OPTIONS: the value a
// sandboxed run whose environment is env gives the variable.
func NodeOptionsIn(env []string) string {
	return NodeOptions(lookup(env, NodeOptionsVar))
}
