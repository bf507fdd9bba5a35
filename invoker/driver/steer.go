package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
)

// Steer implements invoker.Session: it hands prompt to the protocol's
// Steerer while a turn is in progress, and queues the lines it returns.
func (s *session) Steer(ctx context.Context, prompt string) error {
	fail := func(err error) error { return &cliError{CLI: s.cli, Err: err} }
	if prompt == "" {
		return fail(fmt.Errorf("%w: Session.Steer needs a prompt", invoker.ErrInvalidRequest))
	}
	st, ok := s.proto.(Steerer)
	if !ok || !s.e.b.Capabilities().Steer {
		return fail(&unsupportedError{field: "Steer", hint: s.e.b.Hint("Steer"), method: true})
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	// Under the decoder lock, the turn in flight and whether the protocol
	// reported its end are what the reader established: a turn whose end
	// was decoded (its done event delivered, or about to be) takes no
	// steer, which the CLI would answer with a turn of its own after it.
	r := s.r
	r.decMu.Lock()
	s.mu.Lock()
	cur, closing := s.cur, s.closing
	s.mu.Unlock()
	var refused error
	select {
	case <-s.done:
		refused = s.closedError()
	default:
		switch {
		case closing:
			refused = s.closedError()
		case cur == nil || cur.last:
			refused = fmt.Errorf("%w: no turn is in progress to steer; send the message with Session.Turn", invoker.ErrInvalidRequest)
		}
	}
	if refused != nil {
		r.decMu.Unlock()
		return fail(refused)
	}
	lines, err := func() (lines [][]byte, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the session protocol failed to steer the turn: %v", p)
			}
		}()
		return st.Steer(prompt)
	}()
	r.decMu.Unlock()
	if err != nil {
		if !errors.Is(err, invoker.ErrInvalidRequest) && !errors.Is(err, invoker.ErrUnsupported) {
			err = fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return fail(err)
	}
	s.write(lines...)
	return nil
}

// checkSwitch checks the model and permission a turn switches to: each
// needs its capability, and the permission may not rise above the one the
// session was opened with.
func (s *session) checkSwitch(t *invoker.TurnRequest) error {
	caps := s.e.b.Capabilities()
	if t.Model != "" && !caps.SwitchModel {
		return &unsupportedError{field: "Model", hint: s.e.b.Hint("SwitchModel"), turn: true}
	}
	if t.Permission == "" {
		return nil
	}
	if !t.Permission.Valid() {
		return fmt.Errorf("%w: TurnRequest.Permission %q is not a permission level: use invoker.ReadOnly, WorkspaceWrite or Unlimited", invoker.ErrInvalidRequest, string(t.Permission))
	}
	if t.Permission.Rank() > s.sreq.Permission.Rank() {
		return fmt.Errorf("%w: TurnRequest.Permission %s is above the session's ceiling %s: open the session with the highest level any turn may need", invoker.ErrInvalidRequest, t.Permission, s.sreq.Permission)
	}
	if !caps.SwitchPermission {
		return &unsupportedError{field: "Permission", hint: s.e.b.Hint("SwitchPermission"), turn: true}
	}
	return nil
}
