package driver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// oneShot carries the one turn of a one-shot run of Invoke: the prompt on
// the CLI's standard input, the lines decoded by the backend's Decoder,
// and the turn's end the CLI's exit. It is the run's conversation and the
// turn's carrier.
type oneShot struct {
	r       *run
	t       *turn
	log     *slog.Logger
	prompt  string // Command.Stdin; "" gives the CLI the null device
	maxLine int    // Options.MaxLineSize, for the warning of a skipped line

	// mu guards dec: the engine calls a Decoder from one goroutine at a
	// time, and the stdout and stderr readers both call it.
	mu  sync.Mutex
	dec Decoder

	ids stamper // the stdout reader's
}

// startOneShot starts the one-shot run of t for req, whose check decided
// the sandbox sb: the backend's command and decoder, on the run's one-shot
// conversation. On error nothing runs.
func (e *engine) startOneShot(ctx context.Context, req *invoker.Request, sb sandboxAsk, t *turn, tel *span) error {
	sb.mcp = req.MCPServers
	breq := *req
	breq.Sandbox = sb.backendSandbox()
	cmd, err := e.b.Command(&breq)
	if err != nil {
		return asInvalid(err)
	}
	if err := validateImages(req.Images); err != nil {
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		return err
	}
	o := &oneShot{t: t, log: e.logger(tel), prompt: cmd.Stdin, maxLine: e.cfg.maxLineSize, dec: e.b.NewDecoder(req)}
	cb := newCallbacks()
	o.r = e.newRun(runSpec{conv: o, cb: cb, tel: tel, cmd: cmd, workdir: req.Workdir, env: req.Env, input: o.prompt != "", turnAfter: true,
		limits: e.cfg.limitsFor(req.Limits), sandbox: sb, onQueued: req.OnEvent})
	t.carry(o, o.r, cb, o.r.over()) // the turn ends with the run
	err = e.start(ctx, o.r)
	t.res.Queued = o.r.queued
	if err != nil {
		return err
	}
	t.res.Containment, t.res.Sandbox = o.r.level(), o.r.sbx.held()
	return nil
}

// writeInput writes the prompt and closes standard input, so that CLIs
// that read their prompt to end of file start working. It runs
// concurrently with the readers, so a prompt larger than the pipe's buffer
// cannot deadlock.
func (o *oneShot) writeInput(w *os.File, _ <-chan struct{}) {
	_, err := io.WriteString(w, o.prompt)
	if err != nil && !errors.Is(err, os.ErrClosed) {
		o.log.Debug("writing the prompt", "err", err)
	}
	w.Close()
}

func (o *oneShot) stdoutLine(line []byte) error {
	o.mu.Lock()
	events, err := decodeLine(o.log, line, func() ([]invoker.Event, error) { return o.dec.Decode(line) })
	o.mu.Unlock()
	o.ids.stamp(events)
	o.t.deliver(events)
	return err
}

// lineSkipped warns of the skipped line; the verdict reports it once the
// CLI has exited (the run reads on: the CLI's exit comes after its last
// line).
func (o *oneShot) lineSkipped(size int64) {
	o.t.deliver([]invoker.Event{skippedWarning(size, o.maxLine)})
}

func (o *oneShot) stderrLine(line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return inspectStderr(func() error { return o.dec.Stderr(line) })
}

// ended asks the decoder what the run established, for the turn, whose end
// is the run's: the CLI's exit.
func (o *oneShot) ended() {
	o.mu.Lock()
	o.t.out = o.outcome()
	o.mu.Unlock()
}

// outcome asks the decoder what the run established; a panic in it gives
// an empty Outcome.
func (o *oneShot) outcome() (out Outcome) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("decoder panicked in Outcome", "panic", p)
			out = Outcome{}
		}
	}()
	end := o.r.end()
	return o.dec.Outcome(end.state.Code, end.stderr)
}

// begin has nothing to do: the prompt is on its way on standard input.
func (o *oneShot) begin(*turn, context.Context) error { return nil }

// interrupt stops the CLI with the ladder: a one-shot turn ends when the
// CLI does.
func (o *oneShot) interrupt(_ *turn, why error, g graces) time.Duration {
	o.r.stop(why, g)
	return 0
}

func (o *oneShot) escalate(*turn, error) {} // interrupt gives no grace to pass

// verdict fills the result from the decoder's outcome and the run's end,
// and judges both (run.verdict): the run's end is the turn's.
func (o *oneShot) verdict(t *turn) error {
	end, out, res := o.r.end(), &t.out, t.res
	res.ExitCode, res.Stderr, res.OutputCut = end.state.Code, end.stderr, end.cut
	res.SessionID, res.Text, res.Usage, res.Turns = out.SessionID, out.Text, out.Usage, out.Turns
	res.Resources = resources(end.usage)
	res.Connections = o.r.sbx.netRules().connections(0)
	if t.cb.failed() {
		return nil // run re-raises the panic
	}
	return o.r.verdict(out, o.r.skippedError(), t.schema, res)
}

func (o *oneShot) end(*turn) {}
