// Package e2e holds the end-to-end tests of clinvoke: they drive the real,
// npm-installed agent CLIs (versions pinned in package-lock.json) through
// the codex, gemini and claude backends against internal/testkit/fakemodel on
// 127.0.0.1. The tests carry the build tag e2e; run them with e2e/run
// (see README.md in this directory).
package e2e
