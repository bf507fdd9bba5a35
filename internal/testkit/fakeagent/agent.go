package fakeagent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// output writes whole lines to stdout, one write call per line, and lets
// the signal handler take it over for good before exiting.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

// line writes b and a newline with one Write call.
func (o *output) line(b []byte) {
	buf := make([]byte, len(b)+1)
	copy(buf, b)
	buf[len(b)] = '\n'
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Write(buf)
}

// agent is one run of the fake agent.
type agent struct {
	s       Script
	out     *output
	sid     string
	prompt  string
	args    []string
	start   time.Time
	ids     int                    // next codex item / gemini tool number
	tools   int                    // gemini: tool_calls
	pending string                 // gemini: id of the progress tool call awaiting its result
	msgID   string                 // claude: id of the assistant message being printed
	reqID   string                 // claude: its request id
	turns   atomic.Int32           // claude: num_turns (read by the signal handler)
	model   atomic.Pointer[string] // claude: the model a session switched to
	limits  limits                 // flags of structured answers and limits (structured.go)
	helper  *sessionHelper         // Script.SessionHelper, in a session
	claude  *claudeTwoWay          // Claude Code's session: two-way control
	stopped bool                   // a limit ended the turn: exit status 1
	aborted bool                   // the session turn in progress was interrupted

	grandchild atomic.Pointer[exec.Cmd] // the Grandchild helper (read by the signal handler)
}

// startHelpers starts the helpers of the script (startHelpers), keeping
// the Grandchild's command for the signal handler.
func (a *agent) startHelpers() error {
	c, err := startHelpers(&a.s)
	if c != nil {
		a.grandchild.Store(c)
	}
	return err
}

// run runs the fake agent and returns its exit status.
func run(s Script) int {
	s.touch()
	a := &agent{
		s:     s,
		out:   &output{w: os.Stdout},
		args:  os.Args[1:],
		start: time.Now(),
	}
	a.sid = s.SessionID
	if a.sid == "" {
		a.sid = resumeID(s.flavor(), a.args)
	}
	if a.sid == "" {
		if s.flavor() == Codex {
			a.sid = uuid7()
		} else {
			a.sid = uuid4()
		}
	}
	rec := recorder{dir: s.RecordDir}
	rec.addProc("agent")
	rec.writeRun(a.args, nil)

	a.handleSignals()

	if s.Stderr != "" {
		os.Stderr.WriteString(s.Stderr)
	}
	if isClaudeSession(s.flavor(), a.args) {
		return a.claudeSession(rec)
	}
	if isCodexAppServer(s.flavor(), a.args) {
		return a.codexAppServer(rec)
	}
	if isACP(s.flavor(), a.args) {
		return a.acpSession(rec)
	}
	if !s.SkipStdin {
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: reading stdin:", err)
		}
		rec.writeRun(a.args, in)
		a.prompt = promptOf(s.flavor(), a.args, string(in))
	} else {
		a.prompt = promptOf(s.flavor(), a.args, "")
	}
	a.limits = limitsOf(s.flavor(), a.args)
	if !checkOutputSchema(s.flavor(), a.args) {
		return 1
	}

	if err := a.startHelpers(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	time.Sleep(s.SilentFor)

	if s.Replay != "" {
		if err := a.replay(); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			return 2
		}
		return s.ExitCode
	}
	a.stream()
	a.s.touchAtExit()
	if a.stopped && s.ExitCode == 0 {
		return 1
	}
	if s.ExitCode == 0 && s.Fail != "" && s.flavor() != Gemini {
		return 1
	}
	return s.ExitCode
}

// stream prints the scripted events.
func (a *agent) stream() {
	s := &a.s
	f := flavourOf(s.flavor())
	f.begin(a)
	if s.Malformed {
		a.malformed()
	}
	a.loadInCLI()
	if s.Tool {
		f.tool(a)
		if a.stopped {
			return // a limit ended the turn, with its own terminal event
		}
	}
	if s.StreamFor > 0 {
		end := time.Now().Add(s.StreamFor)
		for k := 0; time.Now().Before(end); k++ {
			f.progress(a, k)
			time.Sleep(s.interval())
		}
	}
	if s.HugeLine > 0 {
		f.huge(a, s.HugeLine)
	}
	if s.Fail != "" {
		f.failAnswer(a)
	} else {
		pieces := split(s.answer(), s.Chunks)
		for i := range pieces {
			if i > 0 {
				time.Sleep(s.interval())
			}
			f.chunk(a, pieces, i)
		}
	}
	time.Sleep(s.StallFor)
	if s.NoTerminal {
		return
	}
	if s.Fail != "" {
		f.fail(a)
	} else {
		f.done(a)
	}
}

// malformed prints lines a decoder must survive.
func (a *agent) malformed() {
	a.out.line([]byte(`{"type":"item.completed","item":{"id":"item_`))
	a.out.line([]byte(`this line is not JSON`))
	a.out.line(nil)
	a.out.line([]byte("\xff\xfe invalid \xc3\x28 utf-8 \x80"))
	a.out.line([]byte(`{"type":"fakeagent.unknown","payload":{"n":1}}`))
}

// replay prints the lines of a captured stream.
func (a *agent) replay() error {
	b, err := os.ReadFile(a.s.Replay)
	if err != nil {
		return err
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	for i, l := range bytes.Split(b, []byte("\n")) {
		if i > 0 {
			time.Sleep(a.s.interval())
		}
		a.out.line(l)
	}
	return nil
}

// handleSignals makes SIGINT and SIGTERM behave as in the real CLI of the
// script's flavour, or ignores them.
func (a *agent) handleSignals() {
	ch := make(chan os.Signal, 4)
	for name, sig := range map[string]os.Signal{"SIGINT": os.Interrupt, "SIGTERM": syscall.SIGTERM} {
		if slices.Contains(a.s.SigIgn, name) {
			signal.Ignore(sig) // SIG_IGN: discarded by the kernel
			continue
		}
		signal.Notify(ch, sig)
	}
	go func() {
		for sig := range ch {
			if a.s.IgnoreSignals {
				continue
			}
			a.out.mu.Lock() // never released: no line after this one
			if c := a.grandchild.Load(); c != nil && a.s.GrandchildTraps {
				c.Wait() // until it has recorded what it caught
			}
			code := 0
			switch a.s.flavor() {
			case Codex:
				code = 1
				if sig == syscall.SIGTERM {
					code = 143
				}
			case Claude:
				if sig == syscall.SIGTERM {
					code = 143
					break
				}
				b := claudeInterrupted(a)
				a.out.w.Write(append(b, '\n'))
			case Gemini:
				code = 0
			}
			os.Exit(code)
		}
	}()
}

// promptOf returns the prompt the real CLI would see: the stdin, the
// positional prompt or, for Gemini, -p with stdin appended.
func promptOf(flavor string, args []string, stdin string) string {
	switch flavor {
	case Gemini:
		if p, ok := flagValue(args, "-p", "--prompt"); ok {
			if stdin != "" {
				return p + "\n\n" + stdin
			}
			return p
		}
	case Codex:
		// The last positional argument, unless it is "-" (stdin).
		if n := len(args); n > 0 && args[n-1] != "-" && !strings.HasPrefix(args[n-1], "-") && stdin == "" {
			return args[n-1]
		}
	}
	return stdin
}

// resumeID returns the session id that the arguments ask to resume.
func resumeID(flavor string, args []string) string {
	switch flavor {
	case Codex:
		// codex exec [OPTIONS] resume [OPTIONS] [--] SESSION_ID [PROMPT]
		for i, a := range args {
			if a == "--" {
				break
			}
			if a == "resume" {
				return firstPositional(args[i+1:])
			}
		}
	case Gemini, Claude:
		if v, ok := flagValue(args, "-r", "--resume"); ok && v != "latest" {
			return v
		}
	}
	return ""
}

// firstPositional returns the first argument of a Codex subcommand that is
// not an option (nor an option's separate value), or "".
func firstPositional(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case a == "-i" || a == "--image" || a == "-c" || a == "--config" || a == "-m" || a == "--model":
			i++ // the option's value
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// flagValue returns the value of the first of names found in args, given as
// "name value" or "name=value", before any "--".
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// split cuts s into n pieces of about the same number of runes (at least
// one piece, at most one per rune).
func split(s string, n int) []string {
	r := []rune(s)
	n = max(1, min(n, len(r)))
	pieces := make([]string, 0, n)
	for i := range n {
		pieces = append(pieces, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return pieces
}

// recorder writes what the fake saw into Script.RecordDir (see Record).
type recorder struct{ dir string }

// runFile is the JSON kept in RecordDir/run.json.
type runFile struct {
	Args        []string `json:"args"`
	Dir         string   `json:"dir"`
	Env         []string `json:"env"`
	StdinRead   bool     `json:"stdin_read"`
	StdinLen    int64    `json:"stdin_len"`
	StdinSHA256 string   `json:"stdin_sha256"`
}

// writeRun records the arguments, environment and, once read, stdin. It
// replaces run.json atomically so a reader never sees half of it.
func (r recorder) writeRun(args []string, stdin []byte) {
	if r.dir == "" {
		return
	}
	wd, _ := os.Getwd()
	rf := runFile{Args: args, Dir: wd, Env: os.Environ()}
	if args == nil {
		rf.Args = []string{}
	}
	if stdin != nil {
		sum := sha256.Sum256(stdin)
		rf.StdinRead = true
		rf.StdinLen = int64(len(stdin))
		rf.StdinSHA256 = hex.EncodeToString(sum[:])
		if err := writeAtomic(r.dir, "stdin", stdin); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
		}
	}
	b, err := marshal(rf)
	if err == nil {
		err = writeAtomic(r.dir, "run.json", b)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
	}
}

// addProc appends "pid starttime role" for this process to RecordDir/pids,
// followed by the turn that started it if one did, with one O_APPEND
// write, so lines of concurrent processes never mix.
func (r recorder) addProc(role string) {
	if r.dir == "" {
		return
	}
	pid := os.Getpid()
	st, _ := startTime(pid)
	f, err := os.OpenFile(r.dir+string(os.PathSeparator)+"pids", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return
	}
	defer f.Close()
	line := fmt.Sprintf("%d %d %s", pid, st, role)
	if n, err := strconv.Atoi(os.Getenv(envTurn)); err == nil && n > 0 {
		line += " " + strconv.Itoa(n)
	}
	f.WriteString(line + "\n")
}

// addSignal records that the process caught sig (Script.GrandchildTraps).
func (r recorder) addSignal(sig os.Signal) {
	if r.dir == "" {
		return
	}
	name := "SIGINT"
	if sig == syscall.SIGTERM {
		name = "SIGTERM"
	}
	f, err := os.OpenFile(r.dir+string(os.PathSeparator)+"signals", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return
	}
	defer f.Close()
	f.WriteString(strconv.Itoa(os.Getpid()) + " " + name + "\n")
}

func writeAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dir+string(os.PathSeparator)+name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
