package mcpadapter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/clinvoke/clinvoke/internal/workspace"
)

// checkWorkdir returns the resolved form of dir, or an error when dir is
// not an absolute path to an existing directory under one of the roots.
//
// The resolved path (symbolic links followed, and ".." taken as the
// kernel takes it: internal/workspace, the judge of the paths an agent
// changes) is what the run gets, so a link inside a root that points
// outside cannot smuggle a run out. A link swapped after the check is out
// of reach of any check made here; roots should not be writable by
// untrusted parties.
func (c *config) checkWorkdir(dir string) (string, error) {
	if dir == "" {
		return "", refusef("workdir is required: give the absolute path of the directory the agent works in")
	}
	if !filepath.IsAbs(dir) {
		return "", refusef("workdir %q is not an absolute path", dir)
	}
	resolved, err := workspace.Existing(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", refusef("workdir %q does not exist", dir)
		}
		return "", refusef("workdir %q: %v", dir, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", refusef("workdir %q: %v", dir, err)
	}
	if !fi.IsDir() {
		return "", refusef("workdir %q is not a directory", dir)
	}
	if !c.underRoots(resolved) {
		return "", refusef("workdir %q is outside the allowed roots (%s)", dir, strings.Join(c.roots, ", "))
	}
	return resolved, nil
}

// checkImage resolves an image path: absolute, or relative to workdir. It
// must exist, be a regular file and lie under the roots like the workdir:
// attaching a file sends its content to the model.
func (c *config) checkImage(workdir, path string) (string, error) {
	if path == "" {
		return "", refusef("empty image path")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(workdir, path)
	}
	resolved, err := workspace.Existing(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", refusef("image %q does not exist", path)
		}
		return "", refusef("image %q: %v", path, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", refusef("image %q: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", refusef("image %q is not a regular file", path)
	}
	if !c.underRoots(resolved) {
		return "", refusef("image %q is outside the allowed roots (%s)", path, strings.Join(c.roots, ", "))
	}
	return resolved, nil
}

// underRoots reports whether the resolved path p is one of the roots or
// lies under one. No roots means no restriction.
func (c *config) underRoots(p string) bool {
	if len(c.roots) == 0 {
		return true
	}
	for _, r := range c.roots {
		if workspace.Within(r, p) {
			return true
		}
	}
	return false
}

// sessionIDPattern is the shape of the session ids the three CLIs emit, a
// UUID (Codex's thread ids are version 7, Gemini's and Claude Code's
// version 4), as a JSON Schema pattern.
const sessionIDPattern = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`

// checkSessionID refuses a session_id that is not a UUID.
//
// The CLIs' resume flags take more than the ids they emit: Gemini's
// --resume takes "latest" and an index into the session list, Codex's exec
// resume a thread name, Claude Code's --resume a search term. On a server
// shared by several clients, {"session_id":"latest"} would continue the
// most recent session of whoever ran last. Only an id a previous result
// returned, which is a UUID, is passed on.
func checkSessionID(id string) error {
	if id == "" || isUUID(id) {
		return nil
	}
	return refusef("session_id %.80q is not a session id: pass back the session_id of an earlier result, "+
		"a UUID such as 0199a213-81c0-7800-8aa1-bbab2a035a53 (names, indexes and \"latest\" are not accepted)", id)
}

// isUUID reports whether s has the textual form of a UUID, 8-4-4-4-12 hex
// digits in either case, as sessionIDPattern does.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
