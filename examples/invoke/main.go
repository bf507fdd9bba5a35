// Command invoke runs one turn of an agent CLI (Codex, Gemini or Claude
// Code) through clinvoke and shows it live: tool calls, reasoning and the
// answer as it streams go to standard error, the final answer to standard
// output.
//
//	go run ./examples/invoke -cli claude -C ~/src/project "explain the build"
//	go run ./examples/invoke -cli codex -permission workspace-write "fix the failing test"
//	echo "a long prompt" | go run ./examples/invoke -cli gemini -
//	go run ./examples/invoke -cli claude -resume SESSION_ID "and now the tests"
//	go run ./examples/invoke -cli claude -i     # a conversation with one warm CLI
//
// Ctrl-C (or -timeout) cancels the context: clinvoke stops the CLI and every
// process it started, and invoke prints the partial answer and the session
// id with the command that resumes it. A second Ctrl-C exits at once.
//
// With -i, invoke holds a conversation instead: it opens one session of the
// CLI (one warm process) and reads prompts line by line from standard
// input, each a turn. Ctrl-C during a turn interrupts it in the CLI's own
// protocol and the conversation goes on; a second Ctrl-C, or one at the
// prompt, ends the session and invoke.
//
// Exit status: 0 on success, 1 when the run failed, 2 for a usage error,
// 124 when -timeout passed, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
)

var backends = map[string]func(...invoker.Options) invoker.Invoker{
	"codex":  codex.New,
	"gemini": gemini.New,
	"claude": claude.New,
}

func main() { os.Exit(run(os.Args[1:])) }

// run runs invoke with the command-line arguments args and returns its
// exit status.
func run(args []string) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	var (
		cli     = fs.String("cli", "claude", "the CLI to run: codex, gemini or claude")
		dir     = fs.String("C", ".", "working directory of the agent")
		resume  = fs.String("resume", "", "resume this session id")
		timeout = fs.Duration("timeout", 0, "cancel the run after this long (0: no limit)")
		perm    = fs.String("permission", "read-only", "read-only, workspace-write or unlimited")
		model   = fs.String("model", "", "model to use instead of the CLI's default")
		system  = fs.String("system", "", "extra system prompt instructions")
		bin     = fs.String("bin", "", "path of the CLI's binary (default: its usual name on PATH)")
		idle    = fs.Duration("idle-timeout", 0, "stop the run when the CLI prints nothing for this long")
		maxLine = fs.Int("max-line", 0, "longest line of the CLI's output read, in bytes (0: 64 MiB)")
		quiet   = fs.Bool("q", false, "print only the final answer")
		inter   = fs.Bool("i", false, "interactive: a prompt loop over one session of the CLI (see interactive.go)")
		images  []string
	)
	fs.Func("image", "attach an image file (repeatable; Codex only)", func(s string) error {
		images = append(images, s)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: invoke [flags] PROMPT...   (PROMPT \"-\" or none: read the prompt from standard input)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	newInvoker, ok := backends[*cli]
	if !ok {
		fmt.Fprintf(os.Stderr, "invoke: unknown -cli %q (want codex, gemini or claude)\n", *cli)
		return 2
	}
	if *inter {
		return runInteractive(newInvoker, interactiveFlags{dir: *dir, bin: *bin, perm: *perm, model: *model,
			resume: *resume, system: *system, idle: *idle, quiet: *quiet})
	}
	prompt, err := readPrompt(fs.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		fs.Usage()
		return 2
	}
	workdir, err := filepath.Abs(*dir)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(workdir); err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "invoke: -C %s: %v\n", *dir, err)
		return 2
	}
	if !invoker.Permission(*perm).Valid() {
		fmt.Fprintf(os.Stderr, "invoke: unknown -permission %q (want read-only, workspace-write or unlimited)\n", *perm)
		return 2
	}
	for i, img := range images {
		if images[i], err = filepath.Abs(img); err != nil {
			fmt.Fprintf(os.Stderr, "invoke: -image %s: %v\n", img, err)
			return 2
		}
	}

	var opts []invoker.Options
	if *bin != "" {
		opts = append(opts, invoker.Options{Binary: *bin})
	}
	if *idle > 0 {
		opts = append(opts, invoker.Options{IdleTimeout: *idle})
	}
	if *maxLine > 0 {
		opts = append(opts, invoker.Options{MaxLineSize: *maxLine})
	}
	inv := newInvoker(opts...)

	// Refuse, in terms of invoke's flags, what this CLI cannot do: the
	// library would refuse it too, naming the Request field.
	caps := inv.Capabilities()
	for _, f := range []struct {
		flag string
		set  bool
		ok   bool
	}{
		{"-model", *model != "", caps.Model},
		{"-resume", *resume != "", caps.Resume},
		{"-image", len(images) > 0, caps.Images},
		{"-system", *system != "", caps.SystemPrompt},
	} {
		if f.set && !f.ok {
			fmt.Fprintf(os.Stderr, "invoke: %s is not supported by %s\n", f.flag, *cli)
			return 2
		}
	}

	// The first Ctrl-C cancels the run; stop() then restores the default
	// handling, so that a second one ends invoke at once. The goroutine
	// has a variable of its own: ctx is reassigned below.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-sigCtx.Done()
		stop()
	}()
	ctx := sigCtx
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}

	live := &printer{w: os.Stderr, quiet: *quiet}
	res, err := inv.Invoke(ctx, invoker.Request{
		Prompt:       prompt,
		Workdir:      workdir,
		Permission:   invoker.Permission(*perm),
		Model:        *model,
		SessionID:    *resume,
		SystemPrompt: *system,
		Images:       images,
		OnEvent:      live.event,
	})
	live.endLine()

	if err == nil {
		fmt.Println(res.Text)
		if !*quiet {
			fmt.Fprintf(os.Stderr, "\n✓ done in %s, session %s (%s)\n", res.Duration.Round(time.Millisecond), res.SessionID, usage(res.Usage))
		}
		return 0
	}

	// Failed or cancelled: show what there is and how to go on.
	status := 1
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "\n✗ timed out after %s; the agent and its processes were stopped\n", *timeout)
		status = 124
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(os.Stderr, "\n✗ interrupted; the agent and its processes were stopped\n")
		status = 130
	default:
		fmt.Fprintf(os.Stderr, "\n✗ %s\n", explain(err, *cli, *bin))
	}
	if res != nil {
		if res.Text != "" {
			fmt.Fprintf(os.Stderr, "partial answer (on standard output):\n")
			fmt.Println(res.Text)
		}
		if res.SessionID != "" {
			fmt.Fprintf(os.Stderr, "session %s; to resume:\n  %s\n", res.SessionID,
				resumeCommand(*cli, workdir, res.SessionID, *perm, *model, *system, *bin))
		}
	}
	return status
}

// installHints says how to install each CLI.
var installHints = map[string]string{
	"codex":  "npm install -g @openai/codex",
	"gemini": "npm install -g @google/gemini-cli",
	"claude": "npm install -g @anthropic-ai/claude-code",
}

// explain words the errors whose fix is one of invoke's flags in terms of
// that flag (the library's messages name its Go API); others it leaves as
// they are.
func explain(err error, cli, bin string) string {
	switch {
	case errors.Is(err, invoker.ErrNotInstalled) && bin == "":
		return fmt.Sprintf("%s is not on PATH: install it with `%s`, or give its path with -bin", cli, installHints[cli])
	case errors.Is(err, invoker.ErrNotInstalled):
		return fmt.Sprintf("-bin %s is not %s's executable: fix the path, or install %s with `%s` and drop -bin", bin, cli, cli, installHints[cli])
	case errors.Is(err, invoker.ErrLineTooLong):
		return "a line of the CLI's output was longer than invoke reads, so the answer may be lost: raise -max-line"
	case errors.Is(err, invoker.ErrIdleTimeout):
		return "the CLI printed nothing for the -idle-timeout; it was stopped"
	}
	return err.Error()
}

// resumeCommand returns the invoke command line that continues session sid
// with the same settings: a resumed run takes its permission, model and
// system prompt from the flags again (without -permission it would come
// back read-only).
func resumeCommand(cli, workdir, sid, perm, model, system, bin string) string {
	args := []string{"invoke", "-cli", cli, "-C", shellQuote(workdir), "-permission", shellQuote(perm)}
	if model != "" {
		args = append(args, "-model", shellQuote(model))
	}
	if system != "" {
		args = append(args, "-system", shellQuote(system))
	}
	if bin != "" {
		args = append(args, "-bin", shellQuote(bin))
	}
	args = append(args, "-resume", shellQuote(sid), "continue")
	return strings.Join(args, " ")
}

// readPrompt joins the arguments, or reads standard input for "-" or none.
func readPrompt(args []string) (string, error) {
	if len(args) == 0 || (len(args) == 1 && args[0] == "-") {
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && len(args) == 0 {
			return "", errors.New("no prompt: give it as arguments, or pipe it with -")
		}
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(string(b)) == "" {
			return "", errors.New("empty prompt on standard input")
		}
		return string(b), nil
	}
	return strings.Join(args, " "), nil
}

// printer writes a readable live view of the events. It is called from one
// goroutine (Request.OnEvent's contract), so it needs no lock.
type printer struct {
	w         io.Writer
	quiet     bool
	streaming bool // in the middle of a streamed message line
}

func (p *printer) event(ev invoker.Event) {
	if p.quiet {
		return
	}
	switch ev.Kind {
	case invoker.KindSession:
		p.line("· session %s", ev.SessionID)
	case invoker.KindDelta:
		if ev.Delta == invoker.KindMessage {
			p.streaming = true
			fmt.Fprint(p.w, ev.Text)
		}
		return
	case invoker.KindMessage:
		if p.streaming {
			// The message was printed as it was written.
			p.streaming = false
			fmt.Fprintln(p.w)
			return
		}
		p.line("» %s", ev.Text)
	case invoker.KindReasoning:
		p.line("… %s", oneLine(ev.Text, 200))
	case invoker.KindToolCall:
		var input string
		if ev.Tool != nil {
			input = oneLine(string(ev.Tool.Input), 200)
		}
		p.line("$ %s %s", toolName(ev.Tool), input)
	case invoker.KindToolResult:
		if ev.Tool != nil && ev.Tool.Output != "" {
			p.line("  %s", oneLine(ev.Tool.Output, 200))
		}
	case invoker.KindWarning:
		p.line("! %s", ev.Text)
	case invoker.KindError:
		p.line("✗ %s", ev.Text)
	}
}

func (p *printer) line(format string, args ...any) {
	p.endLine()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) endLine() {
	if p.streaming {
		fmt.Fprintln(p.w)
		p.streaming = false
	}
}

func toolName(t *invoker.Tool) string {
	if t == nil || t.Name == "" {
		return "tool"
	}
	return t.Name
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func usage(u invoker.Usage) string {
	s := fmt.Sprintf("%d tokens in, %d out", u.InputTokens, u.OutputTokens)
	if u.CostUSD > 0 {
		s += fmt.Sprintf(", $%.4f", u.CostUSD)
	}
	return s
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
