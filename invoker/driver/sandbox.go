package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
)

// The filesystem sandbox (invoker.Sandbox): a run's ceiling, built from
// its permission level when it starts and applied by proc on the thread
// that forks the CLI; its private temporary directory, removed once the
// tree is reaped.

// Sandbox modes (invoker.Sandbox.Mode).
const (
	sandboxOff       = "off"
	sandboxAvailable = "available"
	sandboxRequired  = "required"
)

// sandboxHeld is Result.Sandbox for a run the filesystem ceiling held.
const sandboxHeld = "filesystem"

// overrideSandbox returns base with the non-zero fields of over in their
// place, Hide and Show appended: Options.Sandbox with a request's.
func overrideSandbox(base, over invoker.Sandbox) invoker.Sandbox {
	set(&base.Mode, over.Mode)
	if len(over.Network) > 0 {
		base.Network = over.Network
	}
	base.Hide = append(slices.Clip(base.Hide), over.Hide...)
	base.Show = append(slices.Clip(base.Show), over.Show...)
	return base
}

// sandboxAsk is what a run asks of the sandbox, and what its check
// decided: the Options' and the request's, its level, its CLI (whose
// state it must write), its MCP servers (which it must reach), and
// whether the kernel holds it. It is decided once, when the request is
// checked (engine.sandboxFor), and carried to the run, which neither
// probes nor decides again.
type sandboxAsk struct {
	sb   invoker.Sandbox
	perm invoker.Permission
	cli  string
	mcp  []invoker.MCPServer // as the CLI sees them; set once the Go servers are hosted
	// tools admits the CLI alone to the Go tools' endpoint; nil when they
	// are not served over loopback HTTP.
	tools *toolsGuard
	// nester: the CLI is a SandboxNester.
	nester bool
	// without is why a run that asks for the "available" sandbox runs
	// without it: the host has no filesystem ceiling, or the CLI cannot
	// work inside it (a *nestError); nil when it holds.
	without error
	// tel is the run's span, which the network rules tell of what they
	// could not record; nil records nothing.
	tel *span
}

// sandboxFor decides, in the check of a request and before anything
// starts, the sandbox of a run at perm that asks for req: its fields
// checked (checkSandbox, checkNetwork), whether the kernel holds it, and
// for a SandboxNester whether its CLI runs inside it (nest). A required
// sandbox that cannot hold is an error matching ErrSandbox; so are
// required network rules on a host without the network part.
func (e *engine) sandboxFor(req invoker.Sandbox, perm invoker.Permission) (sandboxAsk, error) {
	refused := e.sandboxRefused()
	a := sandboxAsk{sb: overrideSandbox(e.cfg.sandbox, req), perm: perm, cli: e.b.Name(), nester: refused != ""}
	if err := checkSandbox(a.sb); err != nil {
		return sandboxAsk{}, err
	}
	if err := checkNetwork(a.sb); err != nil {
		return sandboxAsk{}, err
	}
	if !a.on() {
		return a, nil
	}
	if _, err := landlockProbe(); err != nil {
		a.without = err
	} else if a.nester {
		a.without = a.nest(refused)
	}
	if a.without != nil && a.sb.Mode == sandboxRequired {
		return sandboxAsk{}, &sandboxError{err: a.without}
	}
	return a, nil
}

// nest settles the sandbox of a SandboxNester's run, whose CLI cannot
// work inside it with its own sandbox on (refused says why; see
// SandboxNester): at Unlimited, or where the host holds the network part, the CLI runs
// inside the sandbox, below Unlimited with the rules "none" unless the
// run gives its own; elsewhere it cannot, and nest returns why.
func (a *sandboxAsk) nest(refused string) error {
	if a.perm == invoker.Unlimited {
		return nil
	}
	if _, err := netProbe(); err != nil {
		return &nestError{cli: a.cli, refused: refused, missing: netUnavailable(err)}
	}
	if !netWanted(a.sb) {
		a.sb.Network = []string{netNone}
	}
	return nil
}

// holds reports whether the kernel holds the run: it asks for the
// sandbox, and its check found nothing missing.
func (a sandboxAsk) holds() bool { return a.on() && a.without == nil }

// backendSandbox returns the Sandbox a backend sees in its request: the
// one its check decided, not the request's own (which may leave the mode
// to Options.Sandbox, and cannot say whether the host holds it). It is
// Mode "required" with the rules in force where the kernel holds the run
// (a SandboxNester's "none" below Unlimited included; none where the host
// holds no network rules), Mode "off" where it
// does not: so a backend knows what a CLI it configures runs inside (a
// SandboxNester turns its own sandbox off; an ACP agent's command MCP
// servers get NODE_OPTIONS).
func (a sandboxAsk) backendSandbox() invoker.Sandbox {
	if !a.holds() {
		return invoker.Sandbox{Mode: sandboxOff}
	}
	network := a.sb.Network
	if netWanted(a.sb) {
		if _, err := netProbe(); err != nil {
			// The "available" form where the host holds no network
			// rules (startNet runs without them): none are in force.
			network = nil
		}
	}
	return invoker.Sandbox{Mode: sandboxRequired, Network: network, Hide: a.sb.Hide, Show: a.sb.Show}
}

// sandboxRefused returns why the backend's CLI cannot work inside the
// sandbox (SandboxNester), or "".
func (e *engine) sandboxRefused() string {
	if e.nests == nil {
		return ""
	}
	return e.nests.SandboxRefused()
}

// on reports whether the run asks for a sandbox.
func (a sandboxAsk) on() bool { return a.sb.Mode == sandboxAvailable || a.sb.Mode == sandboxRequired }

// checkSandbox checks the fields of a run's sandbox, merged with the
// Options' as sb: a known mode and absolute paths (ErrInvalidRequest).
func checkSandbox(sb invoker.Sandbox) error {
	switch sb.Mode {
	case "", sandboxOff, sandboxAvailable, sandboxRequired:
	default:
		return invalid("unknown Sandbox.Mode %q: use %q, %q or %q", sb.Mode, sandboxOff, sandboxAvailable, sandboxRequired)
	}
	for _, list := range []struct {
		name  string
		paths []string
	}{{"Hide", sb.Hide}, {"Show", sb.Show}} {
		for i, p := range list.paths {
			if !filepath.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
				return invalid("Sandbox.%s[%d] %q is not an absolute path: give the path from /", list.name, i, p)
			}
		}
	}
	return nil
}

// sandboxCapabilities returns Capabilities.Sandbox and SandboxNote. A
// user gets what root gets: Landlock needs no privilege.
// refused is why the CLI cannot work inside it (SandboxNester), or "".
func sandboxCapabilities(refused string) (string, string) {
	abi, err := landlockProbe()
	if err != nil {
		return "", strings.TrimPrefix(err.Error(), sandbox.ErrUnavailable.Error()+": ")
	}
	held, note := sandboxHeld, fmt.Sprintf("Landlock ABI %d holds the filesystem ceiling, for root and other users alike", abi)
	if sandbox.ProbePrivate() == nil {
		note += "; a mount namespace per run gives it its own /tmp and /dev/shm, holds its CLI's settings and instruction files read-only" + nestedNote
	} else {
		if err := stageProbe(); err == nil {
			note += "; a user namespace per run (this program's binary executed again as its first stage) gives it its own /tmp and /dev/shm, holds its CLI's settings and instruction files read-only" + nestedNote
		} else {
			note += "; no mount namespace for this process (root has one), nor a user namespace per run (" + err.Error() + "): /tmp and /dev/shm are not writable, the CLI's settings and instruction files are not held, and the commands the CLI runs share its Landlock domain, so they can read and write its memory"
		}
	}
	netHeld, netNote := netCapabilities()
	if netHeld != "" {
		held += "," + netHeld
	}
	note += "; " + netNote
	switch {
	case refused != "" && netHeld != "":
		note += "; this CLI runs inside it with its own sandbox off, its commands held by the kernel, network included (below Unlimited a run that gives no Sandbox.Network gets \"none\": its model endpoint and its MCP servers' URLs only, for the command MCP servers it starts too), since " + refused
	case refused != "":
		note += "; below Unlimited, Mode \"available\" runs this CLI without it and \"required\" fails, since " + refused + ", and turning that off needs the network part"
	}
	return held, note
}

// nestedNote ends SandboxNote's part on a run's mount namespace: what
// the shells bound there hold.
const nestedNote = ", and starts the commands the CLI runs through a shell in a Landlock domain nested in the CLI's (this program's binary bound over the shells), so that they can neither read nor write its memory"

// landlockProbe says once whether the kernel holds the filesystem
// ceiling: Landlock's ABI, or why not. The answer is the running kernel's
// (how it was built and booted), which cannot change in a process's life.
// Where the kernel's answer is a bare errno (a container's seccomp filter
// refusing the call), the error names the fix (sandbox.NameFix).
var landlockProbe = sync.OnceValues(func() (int, error) {
	abi, err := sandbox.Probe()
	return abi, sandbox.NameFix(err)
})

// sandboxError is a required sandbox this host cannot hold.
type sandboxError struct{ err error }

func (e *sandboxError) Error() string {
	reason := strings.TrimPrefix(e.err.Error(), sandbox.ErrUnavailable.Error()+": ")
	return invoker.ErrSandbox.Error() + ": " + reason + "; or set Sandbox.Mode to \"available\" to run without it where the host has none"
}

func (e *sandboxError) Is(target error) bool { return target == invoker.ErrSandbox }
func (e *sandboxError) Unwrap() error        { return e.err }

// nestError is a required sandbox that cannot hold a SandboxNester's
// CLI: the host lacks the network part that would let it turn its own
// sandbox off.
type nestError struct {
	cli, refused string
	missing      error
}

func (e *nestError) Error() string {
	msg := e.cli + " runs inside the sandbox with its own sandbox off only where the network part holds too (" + e.refused + ")"
	if e.missing != nil {
		msg += ", and " + e.missing.Error()
	}
	return msg
}

func (e *nestError) Unwrap() error { return e.missing }

// runSandbox is a started run's sandbox: what to undo once it is over.
type runSandbox struct {
	rules  *sandbox.Ruleset // until the root is started
	on     bool             // a ceiling holds the run
	priv   bool             // the run has its private /tmp and /dev/shm
	noPriv string           // else why not
	ns     *os.File         // their mount namespace, held until the tree is reaped
	temp   string
	drop   func() error // removes temp
	ahead  bool         // the next run's temp is being made ahead (sandbox.MakeTempAhead)
	net    *runNet      // the network rules in force, nil without

	stage        *sandbox.Stage // a user's run born by a first stage in a user namespace (no network rules)
	stageRuleset *os.File       // its ruleset, until the root is started
	noStage      string         // why a user's run without network rules has no such stage

	cli      string
	unheldMu sync.Mutex
	unheld   []string               // the CLI's settings files missing when the run started, not yet made
	seen     []settingsSeen         // the others, as they were at the start or last warned of
	links    pending[invoker.Event] // the settings links into hidden paths, until the first event
	skipped  []string               // the links on the way to a settings file that could not be held
	walked   *sandbox.Walked        // the walk for held names below the working directory's top at the start
	walkEnd  []invoker.Event        // what the walk at the end found, until a turn takes it (unheldMu)
}

// settingsSeen is a settings file as the run found it at its start: the
// file it leads to (os.Stat), and where it leads when it is a link.
type settingsSeen struct {
	path   string
	fi     os.FileInfo
	target string
}

// seeSettings returns what path is now; fi is nil where it is gone.
func seeSettings(path string) settingsSeen {
	s := settingsSeen{path: path}
	s.fi, _ = os.Stat(path)
	s.target, _ = os.Readlink(path)
	return s
}

// changed reports whether the file now differs from s: another file
// (inode), size, modification or change time (the run owns the file and
// can set back the one, never the other), or a link that leads elsewhere.
func (s settingsSeen) changed(now settingsSeen) bool {
	if (s.fi == nil) != (now.fi == nil) || s.target != now.target {
		return true
	}
	return s.fi != nil && (!os.SameFile(s.fi, now.fi) || s.fi.Size() != now.fi.Size() ||
		!s.fi.ModTime().Equal(now.fi.ModTime()) || !ctimeOf(s.fi).Equal(ctimeOf(now.fi)))
}

// prepare builds the ruleset of a run about to start attr at workdir, sets
// it as attr.Restrict, and gives the run its private temporary directory
// (TMPDIR and the caches in attr.Env, unless the program set the caches),
// and its node processes a SIGUSR1 that opens no inspector (NODE_OPTIONS,
// sandbox.NodeOptions).
// It returns nil when the run asks for no sandbox, or for "available"
// where its check found that it cannot hold (sandboxAsk.without).
func (a sandboxAsk) prepare(attr *proc.Attr, workdir string, setEnv []string, log interface {
	Debug(msg string, args ...any)
}) (*runSandbox, error) {
	if !a.on() {
		return nil, nil
	}
	if a.without != nil {
		log.Debug("the run goes without the sandbox", "reason", a.without)
		return nil, nil
	}
	rs := &runSandbox{drop: func() error { return nil }}
	var err error
	if rs.net, err = a.startNet(attr.Env, log); err != nil {
		return nil, err
	}
	if rs.net != nil && !rs.net.wrap {
		// Made on a thread of its own while the ceiling is built below:
		// the forking thread only joins it (Enter).
		rs.net.n.Prepare()
	}
	temp, drop, err := sandbox.NewTemp()
	if err != nil {
		rs.undo()
		return nil, fmt.Errorf("sandbox: making the run's temporary directory: %w", err)
	}
	rs.temp, rs.drop = temp, drop
	home := envValue(attr.Env, "HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	state, files := sandbox.State(a.cli, attr.Env, home)
	for _, d := range state {
		// The CLI makes them itself when it may write their parent; here
		// it may not.
		if err := os.MkdirAll(d, 0o700); err != nil {
			rs.undo()
			return nil, fmt.Errorf("sandbox: making %s, where %s keeps its state: %w", d, a.cli, err)
		}
	}
	p := sandbox.Policy{
		Level:    sandboxLevel(a.perm),
		Workdir:  workdir,
		Held:     workspace.ConfigNames(),
		Temp:     temp,
		Writable: append(state, files...),
		Hidden:   append(defaultHidden(home), a.sb.Hide...),
		Masked:   defaultMasked(),
		Visible:  append(installOf(attr.Path, attr.Env), a.sb.Show...),
		Private:  true,
		Settings: sandbox.Settings(a.cli, attr.Env, home),
		Named:    slices.Concat([]string{attr.Path}, attr.Args[1:], attr.Env),
	}
	if p.Level != sandbox.Unlimited {
		// Nothing can be bound over a file that does not exist: one the
		// run makes is warned of instead (settingsWarnings), and so is one
		// that changes where the files are not held (no mount namespace).
		rs.cli = a.cli
		for _, f := range p.Settings {
			if _, err := os.Lstat(f); errors.Is(err, os.ErrNotExist) {
				rs.unheld = append(rs.unheld, f)
			} else if err == nil {
				rs.seen = append(rs.seen, seeSettings(f))
			}
		}
	}
	if rs.rules, err = sandbox.Build(p); err != nil {
		rs.undo()
		return nil, err
	}
	for _, l := range rs.rules.HiddenLinks() {
		dir := filepath.Dir(l.Target)
		log.Debug("a settings file links into a hidden path: the CLI cannot read it", "link", l.Path, "target", l.Target, "show", dir)
		rs.links.add(invoker.Event{Kind: invoker.KindWarning, Text: fmt.Sprintf(
			"%s is a symbolic link to %s, which the sandbox hides: %s cannot read it as its settings, memory or instructions; "+
				"add %s to Sandbox.Show to let the CLI read it (if the link is yours), or remove the link", l.Path, l.Target, a.cli, dir)})
	}
	if rs.rules != nil {
		attr.Restrict, rs.on = rs.rules.Restrict, true
	}
	if rs.net == nil && rs.rules != nil && sandbox.ProbePrivate() != nil {
		// A user's run: its private roots and held settings by a first
		// stage in user and mount namespaces of its own, where the host
		// allows them (under network rules, Wrap's first stage makes them).
		if err := stageProbe(); err != nil {
			rs.noStage = err.Error()
		} else if plan := rs.rules.PrivatePlan(); plan != nil {
			if err := rs.stageAttr(attr, plan); err != nil {
				rs.undo()
				return nil, fmt.Errorf("sandbox: the run's user namespace: %w", err)
			}
		}
	}
	if rs.net != nil {
		attr.Env = append(rs.net.n.MergeEnv(attr.Env), rs.net.env...)
	}
	if rs.net != nil && rs.net.wrap {
		if err := rs.net.wrapAttr(attr, rs.rules); err != nil {
			rs.undo()
			return nil, fmt.Errorf("sandbox: the run's network namespace: %w", err)
		}
	} else if rs.net != nil {
		attr.Restrict = rs.net.enterRestrict(rs.rules)
	}
	env := []string{"TMPDIR=" + temp, "TMP=" + temp, "TEMP=" + temp,
		sandbox.NodeOptionsVar + "=" + sandbox.NodeOptionsIn(attr.Env)}
	for _, kv := range sandbox.Caches(filepath.Join(temp, "cache")) {
		k, _, _ := strings.Cut(kv, "=")
		if envValue(setEnv, k) == "" {
			env = append(env, kv)
		}
	}
	for _, kv := range env {
		attr.Env = replaceEnv(attr.Env, kv)
	}
	return rs, nil
}

// held returns Result.Sandbox of the run.
func (rs *runSandbox) held() string {
	var parts []string
	if rs != nil && rs.on {
		parts = append(parts, sandboxHeld)
	}
	if rs != nil && rs.net != nil {
		parts = append(parts, sandboxNetHeld)
	}
	return strings.Join(parts, ",")
}

// bypassUnrecorded returns why the run's connections that bypass the
// network rules' proxy are refused without being recorded, or nil (also
// without network rules); call it once the root is started.
func (rs *runSandbox) bypassUnrecorded() error {
	if rs == nil || rs.net == nil || rs.net.n == nil {
		return nil
	}
	return rs.net.n.BypassRecorded()
}

// private reports whether the run got its private /tmp and /dev/shm, and
// if not, why; call it once the root is started.
func (rs *runSandbox) private() (bool, string) {
	if rs == nil {
		return false, "no sandbox"
	}
	return rs.priv, rs.noPriv
}

// settingsWarnings returns a KindWarning event for each settings,
// memory or instruction file of the CLI (sandbox.Settings) that did not
// exist when the run started, below Unlimited, and exists now: the run
// made it, and the sandbox, which holds such a file read-only by binding
// it over itself, could not hold one that was missing. So is each that
// existed and has changed (another file, size, modification or change
// time, or a link that leads elsewhere): the sandbox held it only where
// the run got its mount namespace, and where it did, the change came from
// outside the run and is worded so. Each change is warned of once, and the
// file left as the run left it; a later change of the same file (or of
// one the run made) is warned of again. tool is the tool whose result prompted the look, or nil. The stdout
// reader calls it after a tool's result and at a turn's end, as it does
// limitWarnings; the run's end looks a last time (endWarnings).
func (rs *runSandbox) settingsWarnings(tool *invoker.Tool) []invoker.Event {
	if rs == nil {
		return nil
	}
	rs.unheldMu.Lock()
	defer rs.unheldMu.Unlock()
	var evs []invoker.Event
	for i, s := range rs.seen {
		now := seeSettings(s.path)
		if !s.changed(now) {
			continue
		}
		rs.seen[i] = now
		what, why := "the run changed "+s.path, "the sandbox could not hold it read-only (no mount namespace for the run)"
		if rs.priv {
			// Held read-only for the run: written from outside it, or
			// through a link on the way that could not be held.
			what, why = s.path+" changed while the run was running", "the sandbox held it read-only for the run, so the change came from outside the run or through a link on the way that could not be held"
		}
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: fmt.Sprintf(
			"%s, which %s reads at its next start (its settings, memory or instructions): %s; review it before the next run", what, rs.cli, why)})
	}
	rs.unheld = slices.DeleteFunc(rs.unheld, func(f string) bool {
		now := seeSettings(f)
		if now.fi == nil && now.target == "" {
			return false
		}
		rs.seen = append(rs.seen, now)
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: fmt.Sprintf(
			"the run made %s, which %s reads at its next start (its settings, memory or instructions): the sandbox could not hold it read-only, as it did not exist when the run started; review it before the next run", f, rs.cli)})
		return true
	})
	return evs
}

// linkWarnings returns, once, a KindWarning event for each settings file
// of the CLI that links into a path the sandbox hides (Ruleset.HiddenLinks):
// the turn delivers them before the run's first event, or at its end where
// the run gave none (a CLI that could not start without its settings).
func (rs *runSandbox) linkWarnings() []invoker.Event {
	if rs == nil {
		return nil
	}
	links, _ := rs.links.take() // one per link the policy names: never past maxPending
	return links
}

// endWarnings logs, once the run's tree is reaped, the settings links
// into hidden paths no turn has delivered yet (a session whose CLI exited
// before its first turn) and, unless a turn ends after the run and looks
// itself (a one-shot run's: see turn.deliverLate), what of the settings
// was made or changed after the last event that could tell the program (a
// session's CLI that wrote it between turns, or a writer in the
// background). It leaves the links for the turn whose end may still
// deliver them (a one-shot run whose CLI gave no event ends its turn after
// the reap), so that they are logged, and events too where a turn is still
// there to carry them. It walks the working directory for the held names
// below its top the run made or replaced (walkWarnings), for that turn to
// deliver, or logs them where none ends after the run.
func (rs *runSandbox) endWarnings(log logger, turnAfter bool) {
	if rs != nil {
		for _, ev := range rs.links.peek() {
			log.Warn("a settings link into a hidden path", "warning", ev.Text)
		}
		rs.walkAtEnd()
	}
	if !turnAfter {
		rs.logSettings(log)
		for _, ev := range rs.walkWarnings(nil) {
			log.Warn("the sandbox could not tell the program of held names the run made", "warning", ev.Text)
		}
	}
}

// walkAtEnd walks, once the run's tree is gone, the working directory
// for the held names below its top (its configuration names: a nested
// repository's .git, a subdirectory's .claude) as the run's start did, and
// keeps a KindWarning event naming those that exist now and did not then,
// and those replaced: the start's mount namespace bound only the names
// that existed, and a name the run made was not held. Only a run whose
// start walked (WorkspaceWrite with the private roots) walks again; the
// rest could not write below the top, or had no name below it held.
func (rs *runSandbox) walkAtEnd() {
	w := rs.walked
	if w == nil {
		return
	}
	rs.walked = nil
	made, replaced := w.Since()
	var parts []string
	if len(made) > 0 {
		parts = append(parts, "made "+strings.Join(made, ", "))
	}
	if len(replaced) > 0 {
		parts = append(parts, "replaced "+strings.Join(replaced, ", "))
	}
	if len(parts) == 0 {
		return
	}
	ev := invoker.Event{Kind: invoker.KindWarning, Text: fmt.Sprintf(
		"the run %s below the working directory: configuration names (a nested repository's .git, a CLI's settings) that a CLI or git there obeys, "+
			"which the kernel did not hold read-only, as it holds only the files that were there when the run started; review them before the next run or git command there",
		strings.Join(parts, "; and "))}
	rs.unheldMu.Lock()
	rs.walkEnd = append(rs.walkEnd, ev)
	rs.unheldMu.Unlock()
}

// walkWarnings returns, once, what the walk at the run's end found
// (walkAtEnd): nothing before the run's tree is gone. tool is the tool
// whose result prompted the look, or nil.
func (rs *runSandbox) walkWarnings(tool *invoker.Tool) []invoker.Event {
	if rs == nil {
		return nil
	}
	rs.unheldMu.Lock()
	defer rs.unheldMu.Unlock()
	evs := rs.walkEnd
	rs.walkEnd = nil
	for i := range evs {
		evs[i].Tool = tool
	}
	return evs
}

// logger is what endWarnings and logSettings log with.
type logger interface {
	Warn(msg string, args ...any)
}

// logSettings logs what of the settings was made or changed since the
// last look (settingsWarnings), where no event can tell the program.
func (rs *runSandbox) logSettings(log logger) {
	for _, ev := range rs.settingsWarnings(nil) {
		log.Warn("the sandbox could not tell the program of a settings file", "warning", ev.Text)
	}
}

// netRules returns the run's network rules in force, nil without.
func (rs *runSandbox) netRules() *runNet {
	if rs == nil {
		return nil
	}
	return rs.net
}

// started releases the ruleset once the root is started (its thread
// keeps it), noting whether the run got its private /tmp and /dev/shm,
// and has the next run's temporary directory made ahead.
func (rs *runSandbox) started() {
	if rs != nil && rs.temp != "" && !rs.ahead {
		rs.ahead = true
		sandbox.MakeTempAhead()
	}
	if rs != nil && rs.rules != nil {
		rs.priv, rs.noPriv = rs.rules.Private()
		if rs.noStage != "" {
			rs.noPriv += "; nor could a user namespace of the run's own: " + rs.noStage
		}
		rs.skipped = rs.rules.Unheld()
		rs.walked = rs.rules.Walked()
		rs.ns = rs.rules.Namespace()
		rs.rules.Close()
		rs.rules = nil
	}
}

// undo releases what prepare made; after the tree is reaped, it removes
// the private temporary directory with everything the run left in it.
func (rs *runSandbox) undo() error {
	if rs == nil {
		return nil
	}
	rs.started()
	rs.closeStage()
	if ns := rs.ns; ns != nil {
		// The namespace, its tmpfs mounts and their pages end here, after
		// the tree: their teardown waits for an RCU grace period, off the
		// run's return (held, it is not on the exit of the run's last
		// process either).
		rs.ns = nil
		go ns.Close()
	}
	if rs.net != nil {
		rs.net.closeRuleset()
		rs.net.n.Close()
	}
	return rs.drop()
}

// stageStarted completes a run born by a first stage in a user namespace
// of its own: it receives the stage's report (the private roots, the
// settings links left as they are) and, under network rules (egress's
// Wrap), the listeners, and serves them. An error means the first stage
// failed, and the CLI is not running under the ceiling.
func (rs *runSandbox) stageStarted() error {
	if rs == nil {
		return nil
	}
	if rs.stage != nil {
		err := rs.stage.Started()
		// The run's mount namespace, held until the tree is reaped and
		// released by undo, as on root's route (with network rules too,
		// below).
		rs.ns = rs.stage.Namespace()
		rs.closeStage()
		if err != nil {
			return &sandboxError{err: err}
		}
		rs.priv, rs.noPriv = rs.stage.Private()
		rs.skipped = rs.stage.Skipped()
		return nil
	}
	if rs.net == nil {
		return nil
	}
	if !rs.net.wrap {
		// The run is born: the next runs' namespaces are made from now
		// on, off this start's path.
		rs.net.n.Running()
		return nil
	}
	rs.net.closeRuleset()
	if err := rs.net.n.Started(); err != nil {
		return &sandboxError{err: netUnavailable(err)}
	}
	if rs.priv = rs.net.n.PrivateHeld(); !rs.priv && rs.on && rs.net.n.PrivateWhy() != "" {
		rs.noPriv = "the first stage in the run's user namespace could not make them: " + rs.net.n.PrivateWhy()
	}
	rs.skipped = rs.net.n.PrivateSkipped()
	// Held until the tree is reaped and released by undo, as above.
	rs.ns = rs.net.n.MountNamespace()
	return nil
}

// closeStage closes what the host keeps of a first stage without network
// rules: its ruleset, and its end of the stage's socket.
func (rs *runSandbox) closeStage() {
	if rs.stageRuleset != nil {
		rs.stageRuleset.Close()
		rs.stageRuleset = nil
	}
	if rs.stage != nil {
		rs.stage.Close()
	}
}

// sandboxLevel maps a permission level to the sandbox's.
func sandboxLevel(p invoker.Permission) sandbox.Level {
	switch p {
	case invoker.WorkspaceWrite:
		return sandbox.WorkspaceWrite
	case invoker.Unlimited:
		return sandbox.Unlimited
	}
	return sandbox.ReadOnly
}

// homeHidden returns the home directory as a hidden path, unless it is
// "/" (a service user's), which would hide everything.
func homeHidden(home string) []string {
	if home == "" || filepath.Clean(home) == "/" {
		return nil
	}
	return []string{home}
}

// installOf returns what the CLI at path needs to read to run: its
// directory, the node_modules tree that holds it (an npm install), and
// the directories of PATH (its interpreter, the tools it runs).
func installOf(path string, env []string) []string {
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dirs = append(dirs, filepath.Dir(real))
		if i := strings.Index(real, "/node_modules/"); i >= 0 {
			dirs = append(dirs, real[:i+len("/node_modules")])
		}
	}
	for _, d := range filepath.SplitList(envValue(env, "PATH")) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// envValue returns the value of key in env (the first one, as getenv
// reads it), or "".
func envValue(env []string, key string) string {
	v, _ := envLookup(env, key)
	return v
}

// envLookup returns the value of key's first entry in env, and whether
// env has one (set empty included).
func envLookup(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// replaceEnv sets kv in env, in place of the key's first value.
func replaceEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	for i, e := range env {
		if ek, _, ok := strings.Cut(e, "="); ok && ek == k {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}

// levelDrop is what a sandboxed session needs to sweep at a lower turn:
// the processes at its first turn (the CLI and what it started opening),
// and the level of its latest turn that started.
type levelDrop struct {
	base   proc.Baseline
	baseOK bool
	taken  bool
	level  invoker.Permission // "" before the first turn
}

// levelRank orders the permission levels.
func levelRank(p invoker.Permission) int {
	switch p {
	case invoker.WorkspaceWrite:
		return 1
	case invoker.Unlimited:
		return 2
	}
	return 0
}

// turnLevel returns the level turn t runs at: its own, else the level of
// the session's latest turn, else the session's.
func (s *session) turnLevel(t *turn) invoker.Permission {
	switch {
	case t.req.Permission != "":
		return t.req.Permission
	case s.drop.level != "":
		return s.drop.level
	}
	return s.sreq.Permission
}

// sweepAtDrop kills, before a sandboxed session's turn t runs below the
// level of the turn before, every process that earlier turns started and
// left running (a shell's background job, a tool run in the background):
// started under the higher level, it would go on writing where the lower
// turn may not. The kernel's ceiling stays the session's opening level
// (a thread's Landlock domain cannot be tightened from outside it); the
// CLI's own level holds the lower turn's tools, and nothing of the higher
// turns runs beside them. What the CLI started while opening (its MCP
// servers) and the CLI are spared. It runs once the protocol has taken
// the turn and before its prompt goes: a turn the protocol refuses runs
// nothing, and leaves the sweep to the next turn that starts. A sweep that
// ended processes is a KindWarning event of turn t, the first it
// delivers, so that the program sees what the lower level stopped.
func (s *session) sweepAtDrop(t *turn) {
	if !s.drop.taken {
		s.drop.base, s.drop.baseOK = s.r.baseline()
		s.drop.taken = true
	}
	prev := s.drop.level
	if prev == "" || s.r.sbx.held() == "" || !s.drop.baseOK || levelRank(s.turnLevel(t)) >= levelRank(prev) {
		return
	}
	rep := s.r.sweepSince(s.drop.base)
	s.tel.swept(rep)
	s.log.Debug("swept the processes of the turns above this turn's level", "from", prev, "to", s.turnLevel(t), "killed", rep.Killed, "survivors", rep.Survivors)
	if len(rep.Survivors) > 0 {
		s.log.Warn("processes of a higher turn survived the sweep at a lower one", "pids", rep.Survivors)
	}
	if len(rep.Killed) > 0 {
		t.deliverOne(invoker.Event{Kind: invoker.KindWarning, Text: fmt.Sprintf(
			"the sandbox ended %d processes that turns at %s left running (pids %v) before this turn at %s: "+
				"the kernel's ceiling of a session cannot be lowered for processes already running; "+
				"run them in a turn at this level, or in a session opened at it",
			len(rep.Killed), prev, rep.Killed, s.turnLevel(t))})
	}
}

// unheldLinks returns the links on the way to a settings file (and the
// files they end at) that could not be held read-only, each with why;
// call it once the root is started.
func (rs *runSandbox) unheldLinks() []string {
	if rs == nil {
		return nil
	}
	return rs.skipped
}
