package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
)

// installHints says how to install each CLI.
var installHints = map[string]string{
	"codex":  "npm install -g @openai/codex",
	"gemini": "npm install -g @google/gemini-cli",
	"claude": "npm install -g @anthropic-ai/claude-code",
}

// checkPermissions checks -permission and -max-permission, so that a bad
// value is reported in the server's own flags before Register sees it.
func checkPermissions(perm, maxPerm string) error {
	p, m := invoker.Permission(perm), invoker.Permission(maxPerm)
	for _, f := range []struct {
		flag string
		p    invoker.Permission
	}{{"-permission", p}, {"-max-permission", m}} {
		if f.p == "" || !f.p.Valid() {
			return fmt.Errorf("%s %q: want read-only, workspace-write or unlimited", f.flag, string(f.p))
		}
	}
	if p.Rank() > m.Rank() {
		return fmt.Errorf("-permission %s is above -max-permission %s: lower the first or raise the second", p, m)
	}
	return nil
}

// flagWorded wraps a CLI's Invoker so that a missing binary is explained
// in the server's own flags (the library's message names its Go option,
// invoker.Options.Binary). Everything else passes through: the embedded
// Invoker's Capabilities keep the tools' schemas exact.
type flagWorded struct {
	invoker.Invoker
	bin string // the -<cli>-bin value, "" for the CLI on PATH
}

// Invoke runs the turn and rewords ErrNotInstalled.
func (w flagWorded) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	res, err := w.Invoker.Invoke(ctx, req)
	return res, w.reword(err)
}

// OpenSession opens a session of the wrapped Invoker, so that -warm keeps
// conversations warm, and rewords ErrNotInstalled.
func (w flagWorded) OpenSession(ctx context.Context, req invoker.SessionRequest) (invoker.Session, error) {
	s, err := w.Invoker.OpenSession(ctx, req)
	return s, w.reword(err)
}

// reword explains ErrNotInstalled in the server's flags.
func (w flagWorded) reword(err error) error {
	if err == nil || !errors.Is(err, invoker.ErrNotInstalled) {
		return err
	}
	name := w.Name()
	var why string
	if w.bin == "" {
		why = fmt.Sprintf("%s is not on the server's PATH: install it on the server's machine with `%s`, or start the server with -%s-bin PATH", name, installHints[name], name)
	} else {
		why = fmt.Sprintf("-%s-bin %s is not %s's executable: fix the server's -%s-bin flag, or install %s with `%s` and drop the flag", name, w.bin, name, name, name, installHints[name])
	}
	return fmt.Errorf("%s: %w: %s", name, invoker.ErrNotInstalled, why)
}
