package driver

import (
	"context"
	"fmt"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// Approvals: the questions a session protocol hands over (Step.Approvals)
// are given to Request.Approve, each on a goroutine of its own, and their
// answers written back; a turn's end withdraws what is still waiting.

// maxPendingApprovals is how many questions of one turn may wait for
// Approve at once. A question the CLI asks beyond it is denied at once,
// without asking, with a message the model reads (where the CLI carries
// one) and a KindWarning event for the program.
//
// Each waiting question holds a goroutine running Approve, and whatever
// Approve holds: without a cap, a CLI that asks without end (a loop, a
// prompt injection) makes the program hold without end until the turn's
// deadline. A model asks about the parallel tool calls of one response at
// most, a few at a time; 64 leaves room for the subagents of a CLI that
// runs several, each asking. The cap is the engine's, not an option: no
// turn that a person or a policy can follow needs more, and a program that
// decides at once never holds more than a few.
const maxPendingApprovals = 64

// A question is an approval given to Approve and not yet answered or
// withdrawn. Its fields are guarded by the session's protoMu.
type question struct {
	a       Approval
	settled bool // its answer, or its withdrawal, was written
}

// askAll asks the approvals of a line whose events were just delivered,
// for the turn t the line belongs to (nil between turns). A question
// refused because too many wait is reported as a KindWarning event, once
// protoMu is released (OnEvent may call back into the session).
func (s *session) askAll(t *turn, asks []Approval) {
	if len(asks) == 0 {
		return
	}
	s.protoMu.Lock()
	if s.cb.failed() {
		// A callback panicked: the tree is being killed, and nothing of
		// the caller's is called any more.
		s.protoMu.Unlock()
		return
	}
	var refused []invoker.Event
	for _, a := range asks {
		if !s.ask(t, a) {
			tool := a.Request.Tool
			refused = append(refused, invoker.Event{Kind: invoker.KindWarning, Tool: &tool, Raw: a.Request.Raw,
				Text: fmt.Sprintf("refused without asking Approve: %s %q (%d questions of this turn already wait for a decision)",
					a.Request.Kind, what(a.Request), maxPendingApprovals)})
		}
	}
	s.protoMu.Unlock()
	s.deliver(t, refused)
}

// what names the action of a for a message: its command, its paths, or
// its tool's name.
func what(a invoker.Approval) string {
	switch {
	case a.Command != "":
		return a.Command
	case len(a.Paths) > 0:
		return strings.Join(a.Paths, ", ")
	}
	return a.Tool.Name
}

// ask handles one approval of the protocol's, for the turn ts (nil
// between turns). Without a turn or a callback the CLI is answered with a
// denial at once, and so it is when maxPendingApprovals questions of the
// turn already wait: ask then returns false. Otherwise Approve runs on a
// goroutine of its own with the turn's context, and the answer is written
// when it returns, unless the turn ended first: then the question was
// withdrawn (see withdraw) and the answer is dropped. The caller holds
// protoMu.
func (s *session) ask(ts *turn, a Approval) bool {
	approve := s.sreq.Approve
	why, full := "", false
	switch {
	case ts == nil:
		why = "no turn is in progress"
	default:
		s.mu.Lock()
		switch {
		case ts.over:
			why = "no turn is in progress"
		case approve == nil:
			why = "the program gave no approval callback"
		case ts.waiting >= maxPendingApprovals:
			why, full = fmt.Sprintf("%d earlier requests of this turn still wait for the program's decision; ask again once they are answered", maxPendingApprovals), true
		default:
			ts.waiting++
			ts.calls.Add(1)
		}
		s.mu.Unlock()
	}
	if why != "" {
		msg := "Denied: " + why + "."
		if full {
			msg = "Denied without asking the program: " + why + "."
		}
		s.write(answerApproval(a, invoker.Decision{Message: msg})...)
		return !full
	}
	req := a.Request
	if req.SessionID == "" {
		req.SessionID = s.ID()
	}
	if req.Cwd == "" && req.Kind == "command" {
		req.Cwd = s.sreq.Workdir // where the CLI runs its commands unless it says otherwise
	}
	q := &question{a: a}
	if ts.questions == nil {
		ts.questions = make(map[*question]struct{})
	}
	ts.questions[q] = struct{}{}
	ts.approving.Add(1)
	go s.askApprove(ts, q, approve, req)
	return true
}

// askApprove runs Approve for the question q of the turn ts and writes its
// answer, unless the question was withdrawn meanwhile, or the CLI was
// asked to end the turn: a decision that comes then is not carried out,
// and the question is withdrawn instead (protoMu orders this against the
// interrupt's lines). It is the one goroutine a question costs.
func (s *session) askApprove(ts *turn, q *question, approve func(context.Context, invoker.Approval) invoker.Decision, req invoker.Approval) {
	defer func() {
		s.mu.Lock()
		ts.waiting--
		s.mu.Unlock()
		ts.calls.Done()
	}()
	defer func() {
		ts.approving.Add(-1)
		s.r.touch() // the CLI's silence counts from the decision
	}()
	var d invoker.Decision
	if !s.cb.call("Approve", func() { d = approve(ts.ctx, req) }) {
		return // the tree is being killed; the turn's end withdraws q
	}
	s.protoMu.Lock()
	if q.settled {
		s.protoMu.Unlock()
		return
	}
	if !ts.interrupted && ts.ctx.Err() == nil && ts.caller.Err() != nil {
		// The caller's context is done, and the interrupt for it is on
		// its way: a decision made now may have been made because of
		// that (a callback that watches a context of the caller's own,
		// such as an MCP call's), and carried out before the interrupt
		// it could let the CLI go on with the turn. The interrupt's
		// withdrawal answers q, after the interrupt's lines.
		s.protoMu.Unlock()
		return
	}
	q.settled = true
	delete(ts.questions, q)
	var lines [][]byte
	if ts.interrupted || ts.ctx.Err() != nil {
		lines = withdrawal(q.a)
	} else {
		lines = answerApproval(q.a, d)
	}
	// Queued under protoMu, where it was decided: an interrupt made after
	// the decision reaches the CLI after the answer, not before it (the
	// CLI would then take the answer to go on with the turn).
	s.write(lines...)
	s.protoMu.Unlock()
	if s.cfg.answered != nil {
		s.cfg.answered()
	}
}

// withdraw withdraws every question of the turn ts that is still waiting
// for Approve, once the CLI was asked to end the turn or the turn ended:
// the CLI is answered at once, whenever Approve returns.
func (s *session) withdraw(ts *turn) {
	s.protoMu.Lock()
	var lines [][]byte
	for q := range ts.questions {
		q.settled = true
		lines = append(lines, withdrawal(q.a)...)
	}
	clear(ts.questions)
	s.write(lines...) // queued where decided, as every answer is (write never blocks)
	s.protoMu.Unlock()
}

// withdrawal returns the protocol's lines that withdraw the question a:
// its Cancel, else a denial.
func withdrawal(a Approval) [][]byte {
	if a.Cancel != nil {
		return safeLines(a.Cancel)
	}
	return answerApproval(a, invoker.Decision{Message: "Denied: the turn ended before the program decided."})
}

// answerApproval returns the protocol's lines for decision d of a.
func answerApproval(a Approval, d invoker.Decision) [][]byte {
	if a.Answer == nil {
		return nil
	}
	return safeLines(func() [][]byte { return a.Answer(d) })
}

// safeLines returns what f returns, or nothing when it panics: a protocol
// must never panic, and a panic of one must not take the program down.
func safeLines(f func() [][]byte) (lines [][]byte) {
	defer func() {
		if recover() != nil {
			lines = nil
		}
	}()
	return f()
}
