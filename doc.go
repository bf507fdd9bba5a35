// Package clinvoke is the root of a module that runs AI coding-agent CLIs —
// OpenAI Codex, Google Gemini CLI, Anthropic Claude Code — from Go under a
// context.Context, and guarantees that when a call returns, the CLI and every
// process it started are gone. It holds no code; start with:
//
//   - package invoker (github.com/clinvoke/clinvoke/invoker): what a program
//     touches — Invoker, Request, Result, Event, Session, Options and the
//     errors;
//   - packages codex, gemini and claude: one backend each, whose New returns
//     an invoker.Invoker;
//   - package mcpadapter: the invokers as tools of an MCP server built on the
//     official Go SDK;
//   - package invoker/invokertest: a scripted stand-in for each CLI, to test
//     code that runs agents without the CLIs, keys or network;
//   - package invoker/driver: the contract for writing a backend of your own.
package clinvoke
