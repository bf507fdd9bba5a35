// Package sandbox holds what a run's processes may touch in the
// filesystem, through the kernel: a ceiling mapped from the permission
// level that the CLI and every process it starts are born under, and that
// none of them can lift, root included.
//
// On Linux the ceiling is a Landlock ruleset (Linux 5.13 and later, no
// privilege needed), built by Build in the host and applied by
// Ruleset.Restrict on the one OS thread that forks the run's root, after
// PR_SET_NO_NEW_PRIVS on that thread: the host's other threads stay free.
// Elsewhere Probe says that there is none.
//
// Landlock allows; it cannot deny a name inside an allowed tree, and its
// rules are attached to inodes. So a directory whose names must stay the
// user's (a working directory's .claude, a CLI home's settings) is
// allowed only reads, and each of its existing entries but those names is
// allowed everything: nothing new can be made at its top, and a held name
// can be neither written, nor removed, nor renamed, nor made anew.
// docs/sandbox.md weighs this against a mount namespace.
package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// A Level is how much of the filesystem a run may change, mapped from the
// request's permission level.
type Level int

const (
	// ReadOnly lets the run write only its CLI's own state (State), its
	// private temporary directory and the terminal and null devices.
	ReadOnly Level = iota
	// WorkspaceWrite adds the working directory, its held names (Held)
	// excepted, and nothing new at its top.
	WorkspaceWrite
	// Unlimited sets no ceiling on writes; reads stay hidden as asked.
	Unlimited
)

// ErrUnavailable is wrapped by the errors of Probe and Build when the
// kernel holds no filesystem ceiling here.
var ErrUnavailable = errors.New("sandbox: no filesystem ceiling on this host")

// A Policy is what a run may write and read.
type Policy struct {
	// Level is what the run may change.
	Level Level
	// Workdir is the run's working directory (absolute).
	Workdir string
	// Held are the names held read-only at the top of Workdir at
	// WorkspaceWrite (workspace.ConfigNames), and below it where the run
	// gets its private roots (Private): each that exists when the run
	// starts, within a bounded walk (docs/sandbox.md).
	Held []string
	// Temp is the run's private temporary directory: writable at every
	// level.
	Temp string
	// Writable are further paths the run may change at every level (the
	// CLI's state, see State). A missing one is left out.
	Writable []string
	// Tops are directories held as Workdir is at WorkspaceWrite, at every
	// level: readable, their existing entries but Held writable (a CLI's
	// home, whose settings stay read-only; see State).
	Tops []Top
	// Hidden are paths the run cannot read (nor list, nor execute), with
	// everything beneath them but Visible. Typically the home directory.
	Hidden []string
	// Visible are paths beneath Hidden that stay readable: the CLI's own
	// directories, its install, the working directory, Temp.
	Visible []string
	// Masked are paths the run cannot read, as Hidden are, held
	// otherwise where the run gets its mount namespace (Private): each is
	// covered there by an empty file system, a file or a directory with
	// no entries and no permissions, so that the rules need not split its
	// directory (a hidden file costs a rule for each of its siblings, and
	// a sibling replaced during the run is unreadable). Root reads a
	// masked file as empty, another user is refused it. Where the run
	// gets no mount namespace, and for a path with a Visible path beneath
	// it, they are Hidden; one at or beneath a Visible path is not held.
	Masked []string
	// Private gives the run a /tmp and a /dev/shm of its own where the
	// host allows a mount namespace (CAP_SYS_ADMIN): fresh tmpfs mounts,
	// writable by the run, gone with it, into which the paths above that
	// lie beneath them are bound back at their paths (read-only unless
	// writable above or at Unlimited). Ruleset.Private says whether they
	// held.
	Private bool
	// Settings are files held read-only, bound over themselves, below
	// Unlimited where the run gets its private /tmp (Private): the CLI's
	// settings, memory and instructions (see Settings). A missing one is
	// left out. One that is a symbolic link is held as a link, with each
	// link it leads through and the file they end at (not in /proc, /sys
	// or /dev; one of them that cannot be held is skipped, see
	// Ruleset.Unheld). The target is readable only where it is visible
	// anyway: one in a Hidden path is not (Ruleset.HiddenLinks).
	Settings []string
	// Named are texts of the run's command line and environment: the
	// paths beneath /tmp or /dev/shm they name (a configuration file the
	// host wrote for the CLI) are bound read-only into the private ones.
	Named []string
}

// A Link is a settings file (Policy.Settings) that is a symbolic link to
// a file the run cannot read.
type Link struct {
	// Path is the settings file, Target the file its links end at
	// (resolved).
	Path, Target string
}

// A Top is a directory whose existing entries are writable but for the
// held names, and at whose top nothing can be made, removed or renamed.
type Top struct {
	Dir  string
	Held []string
}

// State returns what the CLI named cli must write to work, given its
// environment env (KEY=VALUE, the run's) and the home directory home: its
// directories (its configuration home first), whole, which the caller
// makes if missing, and the files it keeps in the home directory. These are
// facts of each CLI, measured with the pinned versions (docs/sandbox.md);
// a CLI not listed (an ACP agent) gets nothing but the run's private
// temporary directory.
//
// The whole home, because each of the three CLIs replaces files at its
// top by writing a new file and renaming it over the old one (Gemini CLI's
// projects.json, Codex's state), which a ceiling that holds the settings
// beside them would refuse: Landlock cannot tell a name from its sibling
// in a directory where files may be made. So a run can change its CLI's
// settings, memory and instructions (docs/sandbox.md says what holds them
// instead).
func State(cli string, env []string, home string) (dirs, files []string) {
	f, ok := stateFacts[cli]
	if !ok || home == "" {
		return nil, nil
	}
	for i, d := range f.dirs {
		d = filepath.Join(home, d)
		if i == 0 && f.homeVar != "" {
			if v := lookup(env, f.homeVar); v != "" && filepath.IsAbs(v) {
				d = filepath.Clean(v)
				if f.homeVarIsParent {
					d = filepath.Join(d, f.dirs[0])
				}
				// Moved: what the CLI keeps beside it moves too.
				return []string{d}, nil
			}
		}
		dirs = append(dirs, d)
	}
	for _, name := range f.files {
		files = append(files, filepath.Join(home, name))
	}
	return dirs, files
}

// Settings returns the CLI's own settings, memory and instruction files
// in its configuration home (as State finds it), which the run may read
// but not change: held read-only where the run has a mount namespace
// (Policy.Private). These are facts of each CLI, like State's.
func Settings(cli string, env []string, home string) []string {
	dirs, _ := State(cli, env, home)
	if len(dirs) == 0 {
		return nil
	}
	var out []string
	for _, name := range stateFacts[cli].settings {
		out = append(out, filepath.Join(dirs[0], name))
	}
	return out
}

// stateFact is where one CLI keeps its state.
type stateFact struct {
	dirs            []string // below the home directory; the first is its home
	homeVar         string   // the variable that moves its home
	homeVarIsParent bool     // homeVar names the directory that holds it
	files           []string // files in the home directory, unless moved
	settings        []string // its settings, memory and instructions, in its home
}

// stateFacts are the CLIs' own state, one place for every reader: the
// three backends, and the ACP agents under the names docs/acp-agents.md
// gives them.
var stateFacts = map[string]stateFact{
	"codex":           {dirs: []string{".codex"}, homeVar: "CODEX_HOME", settings: codexSettings},
	"codex-acp":       {dirs: []string{".codex"}, homeVar: "CODEX_HOME", settings: codexSettings},
	"gemini":          {dirs: []string{".gemini"}, homeVar: "GEMINI_CLI_HOME", homeVarIsParent: true, settings: []string{"settings.json", "GEMINI.md"}},
	"claude":          {dirs: []string{".claude"}, homeVar: "CLAUDE_CONFIG_DIR", files: []string{".claude.json"}, settings: claudeSettings},
	"claude-code-acp": {dirs: []string{".claude"}, homeVar: "CLAUDE_CONFIG_DIR", files: []string{".claude.json"}, settings: claudeSettings},
	"qwen":            {dirs: []string{".qwen"}, settings: []string{"settings.json", "QWEN.md"}},
	"opencode":        {dirs: []string{".local/share/opencode", ".local/state/opencode", ".config/opencode", ".cache/opencode"}},
}

// The settings, memory and instruction files of Codex and Claude Code in
// their homes.
var (
	codexSettings  = []string{"config.toml", "AGENTS.md", "AGENTS.override.md"}
	claudeSettings = []string{"settings.json", "CLAUDE.md"}
)

// Caches returns the environment that sends the caches of the agent's own
// tools (Go's build and module caches, npm's, pip's, XDG's) into dir, a
// directory of the run's private temporary directory: a run cannot poison
// the cache of a later one, and its tools find their caches writable with
// the home directory read-only. The cost is a cold cache per run. Caches
// do not make a tool work at WorkspaceWrite where it writes a new entry at
// the top of the working directory (go build's ./m, a new go.sum,
// npm install's package-lock.json and node_modules): the top admits none,
// so those entries must exist before the run.
func Caches(dir string) []string {
	return []string{
		"XDG_CACHE_HOME=" + filepath.Join(dir, "xdg"),
		"GOCACHE=" + filepath.Join(dir, "go-build"),
		"GOMODCACHE=" + filepath.Join(dir, "go-mod"),
		"npm_config_cache=" + filepath.Join(dir, "npm"),
		"PIP_CACHE_DIR=" + filepath.Join(dir, "pip"),
	}
}

// tempPrefix begins the name of a run's private temporary directory in the
// host's temporary directory; tempOwner follows it.
const tempPrefix = "clinvoke-run-"

// NewTemp makes a run's private temporary directory, readable by its owner
// only, and returns it with the function that removes it and everything
// the run left in it. Its name carries this process's identity, so that
// the first NewTemp of a later process removes the directories of a
// program that died before it could (killed outright, say), caches and
// all (sweepTemps). It takes the directory MakeTempAhead made, where there
// is one still fit to be taken (see tempahead_linux.go).
func NewTemp() (dir string, remove func() error, err error) {
	sweepOnce.Do(sweepTemps)
	if dir = takeTemp(); dir == "" {
		if dir, err = os.MkdirTemp("", tempPrefix+tempOwner()); err != nil {
			return "", nil, err
		}
	}
	return dir, func() error { return removeTemp(dir) }, nil
}

var sweepOnce sync.Once

// Retired runs f on an OS thread of its own, locked to f's goroutine and
// never unlocked, and returns f's error. The thread ends with the
// goroutine, and with it whatever f changed in the thread (a namespace, a
// Landlock domain): no other goroutine ever runs there, and the calling
// thread (the main one, say) is left as it was.
func Retired(f func() error) error {
	done := make(chan error, 1)
	GoRetired(func() { done <- f() })
	return <-done
}

// GoRetired runs f in a new goroutine locked to an OS thread that is not
// the process's main thread, never unlocked, and returns at once: the
// thread ends with f, and whatever f changed in it with the thread. Not
// the main thread: a locked goroutine that ends there does not end the
// thread (the runtime parks it instead, for the process's life), so a
// namespace or a Landlock domain f put it in would stay with the process.
// A goroutine that finds itself on the main thread hands f to another,
// which cannot run there while the first holds the main thread locked.
func GoRetired(f func()) {
	go func() {
		runtime.LockOSThread()
		if !mainThread() {
			f() // never unlocked: the thread ends with this goroutine
			return
		}
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// lookup returns the value of key in env (the last one wins), or "".
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// under reports whether p is dir or beneath it (both clean and absolute).
func under(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

// StageVar names the environment variable that makes this program's
// binary run as a first stage (Wrap's, and internal/egress's) instead of
// the program, with the stage's spec as its value. StageOnlyVar names, in
// a first stage's environment, the variables the host set for the stage
// alone (its Go runtime's GOMAXPROCS), which the stage removes before it
// executes the run's program. A run's environment never takes either from
// its caller: the first stage's are the ones the host sets (SetStageEnv
// replaces every entry of both).
const (
	StageVar     = "CLINVOKE_SANDBOX_STAGE"
	StageOnlyVar = "CLINVOKE_STAGE_ONLY"
)

// IsStageVar reports whether name is one of the variables that make this
// program's binary run as a first stage, or tell the stage what it runs
// with.
func IsStageVar(name string) bool { return name == StageVar || name == StageOnlyVar }
