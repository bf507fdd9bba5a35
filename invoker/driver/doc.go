// Package driver is the contract between clinvoke's engine and the
// backends that adapt one agent CLI each, and the engine itself: what
// database/sql/driver is to database/sql. Programs that run agents import
// package invoker and a backend (codex, gemini, claude); only a backend's
// author needs this package.
//
// A backend implements [Backend]: the command line, environment and
// standard input of its CLI for an invoker.Request, and a [Decoder] that
// turns one line of the CLI's output into events and finally reports an
// [Outcome]. A backend whose CLI has a long-lived mode also implements
// [SessionBackend] and its [SessionProtocol], which speaks the CLI's
// protocol one line at a time and reports each line's [Step]. Its New
// calls [New] with its Backend and the user's invoker.Options:
//
//	func New(opts ...invoker.Options) invoker.Invoker { return driver.New(backend{}, opts...) }
//
// A backend contains no process handling. The engine starts the CLI under
// the containment of the machine, reads its output without a line limit,
// writes its input, stops it with the ladder, sweeps its tree and reaps it,
// for every backend alike. A turn takes one path whatever carries it: the
// one-shot mode (Invoke: the prompt on standard input, the turn's end the
// CLI's exit) or the long-lived mode (a Session's turns, or a run of
// Invoke that only it can honour), so that the same output of a CLI gives
// the same result and error either way. docs/engine.md maps the engine
// for its maintainers.
//
// Package invoker/invokertest checks a backend against the contract, with
// a scripted stand-in for its CLI.
package driver
