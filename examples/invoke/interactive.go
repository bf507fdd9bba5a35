package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// interactiveFlags are the settings of invoke -i from the command line.
type interactiveFlags struct {
	dir, bin, perm, model, resume, system string
	idle                                  time.Duration
	quiet                                 bool
}

// runInteractive opens invoke -i's session on the process's own standard
// streams and signals.
func runInteractive(newInvoker func(...invoker.Options) invoker.Invoker, f interactiveFlags) int {
	workdir, err := filepath.Abs(f.dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		return 2
	}
	var opts []invoker.Options
	if f.bin != "" {
		opts = append(opts, invoker.Options{Binary: f.bin})
	}
	if f.idle > 0 {
		opts = append(opts, invoker.Options{IdleTimeout: f.idle})
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	req := invoker.Request{Workdir: workdir, Permission: invoker.Permission(f.perm), Model: f.model,
		SessionID: f.resume, SystemPrompt: f.system}
	return interactive(newInvoker(opts...), req, os.Stdin, os.Stdout, os.Stderr, sigs, f.quiet)
}

// interactive is invoke -i: a prompt loop over one session of the CLI, one
// warm process for the whole conversation. Each line read from in is a
// turn; its answer streams to errw and the final text goes to out. The
// first interrupt (a value on sigs: Ctrl-C) during a turn interrupts the
// turn in the CLI's own protocol and the loop goes on; a second one while
// the turn ends, or one at the prompt, ends the session and invoke. End of
// input ends them too. It returns invoke's exit status.
func interactive(inv invoker.Invoker, req invoker.Request, in io.Reader, out, errw io.Writer, sigs <-chan os.Signal, quiet bool) int {
	sess, err := inv.OpenSession(context.Background(), req.Session())
	if err != nil {
		fmt.Fprintf(errw, "✗ %v\n", err)
		if errors.Is(err, invoker.ErrUnsupported) {
			fmt.Fprintln(errw, "run invoke without -i: one process per turn, resumed with -resume")
		}
		return 1
	}
	defer func() {
		if err := sess.Close(); err != nil {
			fmt.Fprintf(errw, "! closing the session: %v\n", err)
		}
	}()

	lines := make(chan string)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				return
			}
		}
	}()
	live := &printer{w: errw, quiet: quiet}
	for {
		fmt.Fprint(errw, "> ")
		var prompt string
		select {
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(errw)
				return 0
			}
			prompt = line
		case <-sigs:
			fmt.Fprintln(errw, "\nbye")
			return 130
		case <-sess.Done():
			fmt.Fprintf(errw, "\n✗ the session ended: %v\n", sess.Err())
			return 1
		}
		if strings.TrimSpace(prompt) == "" {
			continue
		}

		ctx, cancel := context.WithCancel(context.Background())
		type turn struct {
			res *invoker.Result
			err error
		}
		done := make(chan turn, 1)
		go func() {
			res, err := sess.Turn(ctx, invoker.TurnRequest{Prompt: prompt, OnEvent: live.event})
			done <- turn{res, err}
		}()
		var t turn
		select {
		case t = <-done:
		case <-sigs:
			live.endLine()
			fmt.Fprintln(errw, "… interrupting the turn (Ctrl-C again to quit)")
			cancel()
			select {
			case t = <-done:
			case <-sigs:
				fmt.Fprintln(errw, "bye")
				return 130 // the deferred Close ends the CLI and its tools
			}
		}
		cancel()
		live.endLine()
		switch {
		case t.err == nil:
			fmt.Fprintln(out, t.res.Text)
			if !quiet {
				fmt.Fprintf(errw, "✓ %s, session %s (%s)\n", t.res.Duration.Round(time.Millisecond), t.res.SessionID, usage(t.res.Usage))
			}
		case errors.Is(t.err, invoker.ErrSessionClosed):
			fmt.Fprintf(errw, "✗ %v\n", t.err)
			if t.res.SessionID != "" {
				fmt.Fprintf(errw, "session %s can be resumed with -resume\n", t.res.SessionID)
			}
			return 1
		case errors.Is(t.err, context.Canceled):
			fmt.Fprintln(errw, "✗ interrupted; the session goes on")
		default:
			fmt.Fprintf(errw, "✗ %v\n", t.err)
		}
	}
}
