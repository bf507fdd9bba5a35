// Package workspace judges whether a file an agent CLI asks to change lies
// inside a run's working directory: the one rule behind
// invoker.WorkspaceWrite for every backend that answers the CLI's requests
// for permission itself (Claude Code's can_use_tool, Codex's file change
// approvals, ACP's session/request_permission).
//
// A path is judged as the CLI will use it, not as it reads: a relative path
// is taken in the CLI's working directory; symbolic links are followed
// wherever they exist; ".." is taken both as the kernel takes it (after the
// link before it is followed) and as Node's path.resolve takes it (before),
// since the CLIs differ, and the path must be inside under both readings.
// The part of the path that does not exist yet is taken as the directories
// the CLI would create. A path whose existing part cannot be read (a loop of
// links, a component that is a file, a directory that cannot be searched)
// is outside, and so is a path through a link of the proc file system
// (/proc/self, /proc/PID/fd/N, /dev/fd/N, /proc/PID/cwd, /proc/PID/root):
// such a link leads where the process it names sees it, not where the
// judge would follow it, and a descriptor can be another file by the
// time the CLI writes.
//
// Some files inside the working directory count as outside all the same:
// the agent CLIs' own configuration, which a later run would obey with
// more power than the permission level gives (Claude Code's hooks, the MCP
// server commands of every CLI) or read as instructions for every later
// session of the user: any file or directory named .git, .claude, .gemini,
// .codex or .agents, a .mcp.json or .claude.json, a .env, and everything
// under the configuration homes that CODEX_HOME and CLAUDE_CONFIG_DIR name.
// A .env is Gemini CLI's configuration: in a trusted folder (which the
// gemini backend requires) it reads the first .env walking up from its
// working directory and sets each variable the file names that its
// environment lacks (a proxy, NODE_OPTIONS, a base URL), for itself and
// every command it runs. (Without
// those variables the homes are ~/.codex and ~/.claude, which the names
// already cover when the working directory holds the home directory.) A
// path starting with "~" is outside: a CLI may take it for a home
// directory.
//
// Abs gives the paths a CLI names in the form the program deciding on them
// sees (invoker.Approval.Paths): absolute, clean, resolved as the judge
// resolves them, each reading of an ambiguous path given.
//
// The judgement is made when the CLI asks. What changes on disk between the
// question and the write (a link created meanwhile by a command the level
// allows) is not seen; see docs/approvals.md.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
)

// configNames are the names of the agent CLIs' configuration files and
// directories: one of them anywhere below the working directory is outside
// it.
// .env is among them because Gemini CLI takes the variables of a working
// directory's .env into its own environment (see the package doc).
var configNames = []string{".git", ".claude", ".gemini", ".codex", ".agents", ".mcp.json", ".claude.json", ".env"}

// ConfigNames returns the names of the agent CLIs' configuration files and
// directories, each of which counts as outside the working directory
// wherever it is below it. Backends that cannot judge each path (a CLI's
// one-shot mode) give the same names to the CLI's own rules.
func ConfigNames() []string { return slices.Clone(configNames) }

// homeVars name the variables that set an agent CLI's configuration home.
var homeVars = []string{"CODEX_HOME", "CLAUDE_CONFIG_DIR"}

// maxLinks bounds the symbolic links followed in one path, as the kernel
// bounds them (ELOOP).
const maxLinks = 40

// A Root is a run's working directory, as the judge of the paths its CLI
// asks to change. The zero Root, and one of an empty or relative working
// directory, holds nothing. A Root is safe for concurrent use.
type Root struct {
	dirs  []string // the working directory: clean, and real when that differs
	homes []string // configuration homes: clean, and real when that differs
	home  string   // the CLI's home directory (HOME), for a leading "~"
}

// New returns the Root of workdir (an absolute path) for a CLI whose
// environment is env (KEY=VALUE entries, later ones winning): the run's
// whole environment, as the engine starts the CLI with it. The host's
// environment is read too, below env: every configuration home the
// variables of either name counts as outside.
func New(workdir string, env []string) *Root {
	r := &Root{}
	if workdir == "" || !filepath.IsAbs(workdir) {
		return r
	}
	r.dirs = forms(workdir)
	for _, kv := range append(os.Environ(), env...) {
		k, v, _ := strings.Cut(kv, "=")
		for _, name := range homeVars {
			if sameVar(k, name) && filepath.IsAbs(v) {
				r.homes = append(r.homes, forms(v)...)
			}
		}
		if sameVar(k, homeVar()) && filepath.IsAbs(v) {
			r.home = filepath.Clean(v)
		}
	}
	return r
}

// homeVar returns the name of the home directory's variable.
func homeVar() string {
	if runtime.GOOS == "windows" {
		return "USERPROFILE"
	}
	return "HOME"
}

// sameVar reports whether k and name are the same environment variable
// (on Windows, names differ in case only).
func sameVar(k, name string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(k, name)
	}
	return k == name
}

// forms returns the clean form of the absolute path p and, when it can be
// resolved and differs, its real form.
func forms(p string) []string {
	clean := filepath.Clean(p)
	if real, err := resolve(clean); err == nil && real != clean {
		return []string{clean, real}
	}
	return []string{clean}
}

// Outside reports why path, which the CLI takes in cwd (the working
// directory when cwd is empty; a relative cwd is taken in the working
// directory), is not a file the permission level WorkspaceWrite lets the
// CLI change, or "" when it is inside the working directory. The reason is
// a phrase for a denial: "it is outside the working directory /w".
func (r *Root) Outside(path, cwd string) string {
	if len(r.dirs) == 0 {
		return "the working directory is not known"
	}
	switch {
	case path == "":
		return "no file is named"
	case strings.IndexByte(path, 0) >= 0:
		return "the path holds a NUL byte"
	case strings.HasPrefix(path, "~"):
		return "the path starts with ~, which the CLI may take for a home directory"
	}
	path = r.join(path, cwd)
	lexical := filepath.Clean(path)
	if why := r.names(lexical); why != "" {
		return why
	}
	var held []heldTarget
	looked := false // held listed, once for both readings
	for _, p := range []string{path, lexical} {
		real, err := resolve(p)
		var proc *procLinkError
		switch {
		case errors.As(err, &proc):
			return proc.Error()
		case err != nil:
			return fmt.Sprintf("its directories cannot be resolved (%v)", err)
		}
		if why := r.judge(real); why != "" {
			return why
		}
		if !looked {
			held, looked = r.heldTargets(), true
		}
		if why := linkedTo(held, real); why != "" {
			return why
		}
	}
	return ""
}

// join returns path, which the CLI takes in cwd (the working directory
// when cwd is empty; a relative cwd is taken in the working directory),
// as an absolute path, not cleaned: ".." is left for each reading to
// take its way. The Root must have a working directory.
func (r *Root) join(path, cwd string) string {
	if filepath.IsAbs(path) {
		return path
	}
	base := cwd
	switch {
	case base == "":
		base = r.dirs[0]
	case !filepath.IsAbs(base):
		base = filepath.Join(r.dirs[0], base)
	}
	return base + string(filepath.Separator) + path
}

// Dir returns the working directory as Abs reports paths: absolute, clean,
// its symbolic links followed (the clean path when they cannot be). It is
// "" for a Root without a working directory.
func (r *Root) Dir() string {
	if len(r.dirs) == 0 {
		return ""
	}
	return r.dirs[len(r.dirs)-1]
}

// Abs returns the files path names, which the CLI takes in cwd as Outside
// does, in the form an invoker.Approval reports them: absolute, clean, and
// with every symbolic link of the part that exists followed, as the
// kernel follows them when the file is written; the part that does not
// exist yet is kept as named. A path read two ways gives both readings,
// the kernel's first: ".." after a link, which the kernel takes after
// following the link and Node's path.resolve before it, and a leading "~"
// or "~/", which a CLI may take for the home directory (HOME of the
// environment New was given). A reading whose links cannot be followed (a
// loop, a file used as a directory, a link of the proc file system) is
// given clean, as named. Abs returns
// nil for an empty path, and for a relative one when the Root has no
// working directory.
func (r *Root) Abs(path, cwd string) []string {
	if path == "" || len(r.dirs) == 0 && !filepath.IsAbs(path) {
		return nil
	}
	joined := path
	if len(r.dirs) > 0 {
		joined = r.join(path, cwd)
	}
	readings := []string{joined, filepath.Clean(joined)}
	if rest, ok := underHome(path); ok && r.home != "" {
		readings = append(readings, filepath.Join(r.home, rest))
	}
	var out []string
	for _, p := range readings {
		real, err := resolve(p)
		if err != nil {
			real = filepath.Clean(p)
		}
		if !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
}

// underHome reports whether path starts with "~" alone or "~" and a
// separator, and returns the rest.
func underHome(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "~")
	if !ok || rest != "" && !os.IsPathSeparator(rest[0]) {
		return "", false
	}
	return rest, true
}

// judge reports why the real path p is outside, or "".
func (r *Root) judge(p string) string {
	if why := r.names(p); why != "" {
		return why
	}
	inside := false
	for _, dir := range r.dirs {
		if _, ok := under(dir, p); ok {
			inside = true
			break
		}
	}
	if !inside {
		return "it is outside the working directory " + r.dirs[0]
	}
	for _, home := range r.homes {
		if _, ok := under(home, p); ok {
			return "it is in " + home + ", the configuration home of an agent CLI"
		}
	}
	return ""
}

// names reports why p, below the working directory, is a CLI's
// configuration, or "".
func (r *Root) names(p string) string {
	for _, dir := range r.dirs {
		rel, ok := under(dir, p)
		if !ok {
			continue
		}
		for _, c := range components(rel) {
			for _, n := range configNames {
				// EqualFold: on a file system that ignores case,
				// .Claude is .claude.
				if strings.EqualFold(c, n) {
					return "it is in " + n + ", which holds an agent CLI's configuration"
				}
			}
		}
	}
	return ""
}

// A heldTarget is what a configuration name at the top of the working
// directory leads to as a symbolic link, resolved.
type heldTarget struct {
	name, target string
}

// heldTargets returns what each configuration name at the top of the
// working directory that is a symbolic link (.env -> .env.local,
// .mcp.json -> tools/mcp.json) leads to: a write there is a write to the
// name. It costs one Lstat a name; only a link is resolved. A name that
// is a link deeper below is not followed.
func (r *Root) heldTargets() []heldTarget {
	dir := r.Dir()
	var out []heldTarget
	for _, n := range configNames {
		l := filepath.Join(dir, n)
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if target, err := resolve(l); err == nil {
			out = append(out, heldTarget{name: n, target: target})
		}
	}
	return out
}

// linkedTo reports why the real path p is (or is beneath) one of held,
// or "".
func linkedTo(held []heldTarget, p string) string {
	for _, h := range held {
		if _, ok := under(h.target, p); ok {
			return "it is what " + h.name + ", which holds an agent CLI's configuration, leads to (" + h.target + ")"
		}
	}
	return ""
}

// under returns p relative to dir when p is dir or below it.
func under(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// components splits a path into its names.
func components(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r < utf8.RuneSelf && os.IsPathSeparator(uint8(r)) })
}

// errNotDir is the error of a path that goes on below a file.
var errNotDir = errors.New("not a directory")

// A procLinkError is the error of a path through a link of the proc file
// system (/proc/self, /proc/PID/fd/N, /dev/fd/N through it). Such a link
// leads where the process it names sees it, and that is not the process
// judging the path: /proc/self is the judge's own, a descriptor number
// of the CLI's may be any file of the judge's, and a descriptor can be
// closed and opened again on another directory between the question and
// the write. The path is not followed: it is outside.
type procLinkError struct {
	link string
}

func (e *procLinkError) Error() string {
	return "it goes through " + e.link + ", a link of the proc file system, which leads where a process sees it (its descriptors, its working directory, its root), not where the judge can follow it"
}

// resolve returns the real form of the absolute path p: every symbolic
// link of its existing part followed, and ".", ".." and repeated
// separators taken as the kernel takes them. A part of p that does not
// exist is kept as named, as the directories and file the CLI would
// create; ".." within it undoes a name. It fails when a link cannot be
// read or is on the proc file system (a *procLinkError), links loop, a
// component is a file with names after it, or the existing part cannot
// be examined.
func resolve(p string) (string, error) {
	vol := filepath.VolumeName(p)
	root := vol + string(filepath.Separator)
	resolved := root
	queue := components(p[len(vol):])
	missing := 0 // how many trailing names of resolved do not exist
	links := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case ".":
			continue
		case "..":
			if missing > 0 {
				missing--
			}
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		if missing > 0 {
			resolved, missing = next, missing+1
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			resolved, missing = next, 1
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			if inProcFS(resolved) {
				return "", &procLinkError{link: next}
			}
			links++
			if links > maxLinks {
				return "", fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if filepath.IsAbs(target) || strings.HasPrefix(target, string(filepath.Separator)) {
				v := filepath.VolumeName(target)
				if v == "" {
					v = vol
				}
				resolved = v + string(filepath.Separator)
				target = target[len(filepath.VolumeName(target)):]
			}
			queue = append(components(target), queue...)
		case !fi.IsDir() && len(queue) > 0:
			return "", fmt.Errorf("%s: %w", next, errNotDir)
		default:
			resolved = next
		}
	}
	return resolved, nil
}
