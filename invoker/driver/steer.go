package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
)

// Steer implements invoker.Session: it hands prompt to the backend's
// Steerer while a turn is in progress, and queues the lines it returns.
func (s *session) Steer(ctx context.Context, prompt string) error {
	if err := s.steer(ctx, prompt); err != nil {
		return s.e.named(err)
	}
	return nil
}

func (s *session) steer(ctx context.Context, prompt string) error {
	if prompt == "" {
		return fmt.Errorf("%w: Session.Steer needs a prompt", invoker.ErrInvalidRequest)
	}
	st := s.e.steerer
	if st == nil {
		return &unsupportedError{field: "Steer", hint: s.e.b.Hint("Steer"), method: true}
	}
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	// Under protoMu, the turn in flight and whether the protocol reported
	// its end are what the stdout reader established: a turn whose end was
	// decoded (its done event delivered, or about to be) takes no steer,
	// which the CLI would answer with a turn of its own after it. The
	// steer's lines are queued under it too (write does not block), so
	// that they reach the CLI in the order the protocol made them: before
	// an interrupt made after them, not after it.
	s.protoMu.Lock()
	if err := s.steerable(); err != nil {
		s.protoMu.Unlock()
		return err
	}
	lines, err := func() (lines [][]byte, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the session protocol failed to steer the turn: %v", p)
			}
		}()
		return st.Steer(s.proto, prompt)
	}()
	if err == nil {
		s.write(lines...)
	}
	s.protoMu.Unlock()
	if err != nil {
		if !errors.Is(err, invoker.ErrInvalidRequest) && !errors.Is(err, invoker.ErrUnsupported) {
			err = fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return err
	}
	if s.cfg.steered != nil {
		s.cfg.steered()
	}
	return nil
}

// steerable returns why no turn can be steered now, or nil; the caller
// holds protoMu.
func (s *session) steerable() error {
	if err := s.usable(); err != nil {
		return err
	}
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil || cur.last {
		return fmt.Errorf("%w: no turn is in progress to steer; send the message with Session.Turn", invoker.ErrInvalidRequest)
	}
	if cur.interrupted || cur.caller.Err() != nil {
		// Queued after the interrupt (made, or on its way for the
		// caller's done context), the steer would reach a turn the CLI
		// was asked to end, and some CLIs take it as a new turn.
		return fmt.Errorf("%w: the turn in progress is being interrupted; send the message with Session.Turn once it has ended", invoker.ErrInvalidRequest)
	}
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
