//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The held names of a working directory (a nested repository's .git, a
// .claude or .mcp.json one directory down, a .env below) are held by the
// ruleset only at its top: Landlock's rules attach to inodes, and a
// subdirectory the run may write allows everything beneath it. Those that
// exist when the run starts can be held by the private roots' mount
// namespace instead, each bound read-only over itself; walkNested finds
// them for the plan.

// A walkBudget bounds walkNested: the directory entries it reads and
// how deep below the top it goes.
type walkBudget struct {
	entries int // entries read, in every directory listed
	depth   int // how deep below the top a directory it lists may be (the top's entries are 1 deep)
}

// nestedBudget is the walk a run's plan makes: a working directory of a
// few thousand entries is walked whole in a millisecond or two, and one
// of more than 10,000 is cut after about 20 ms on a quiet machine (more
// under load or with a cold cache), the cut reported (docs/sandbox.md,
// BenchmarkNestedWalk).
var nestedBudget = walkBudget{entries: 10000, depth: 16}

// unwalked are the directory names the walk does not enter: the
// packages a tool installed, which no user's git or CLI runs in.
var unwalked = []string{"node_modules"}

// A nestedWalk is what walkNested found below the top of a working
// directory.
type nestedWalk struct {
	// Names are the held names found that are no symbolic link, files or
	// directories, sorted: each is bound read-only over itself, whole.
	Names []string
	// Links are the held names found that are symbolic links, followed
	// (linkChain): each is held as a held name of the top that is one.
	Links []chain
	// Cut says where the walk stopped short, or is empty.
	Cut string
}

// walkNested walks the working directory dir, breadth first, for the
// entries named one of held below its top (the top's own are held by the
// ruleset), within budget. It enters neither a held name (held whole),
// nor a symbolic link, nor a directory of unwalked, nor one it cannot
// list; an entry beyond the budget is not read, and Cut says where the
// walk stopped. A dir that is reached through a symbolic link is walked
// at its real path, which the names found are under. It reads the
// filesystem only: the same tree gives the same walk.
func walkNested(dir string, held []string, budget walkBudget) nestedWalk {
	var w nestedWalk
	if dir == "" || len(held) == 0 {
		return w
	}
	dir = filepath.Clean(dir)
	if real, err := resolve(dir); err == nil {
		dir = real // listDir follows no link
	}
	type level struct {
		dir   string
		depth int
	}
	top, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return w
	}
	defer unix.Close(top)
	queue := []level{{dir, 0}}
	read := 0
	var unlisted []string
	var buf [32 << 10]byte
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if d.depth > budget.depth {
			w.Cut = fmt.Sprintf("the walk for held names below the top of %s stopped at %s, past its depth of %d (names below it, and in %d more directories as deep, are not held)", dir, d.dir, budget.depth, len(queue))
			break
		}
		rel := "."
		if d.dir != dir {
			rel = d.dir[len(dir)+1:]
		}
		entries, err := listDir(top, rel, buf[:])
		if errors.Is(err, unix.ENOENT) {
			continue // gone
		}
		if err != nil {
			// The run's user may not list it either, but may know a name
			// in it; or it was replaced by a symbolic link since its
			// parent was listed, which the walk does not follow.
			unlisted = append(unlisted, d.dir)
			continue
		}
		if read+len(entries) > budget.entries {
			w.Cut = fmt.Sprintf("the walk for held names below the top of %s stopped after %d entries, at %s (names in it and in %d more directories are not held)", dir, read, d.dir, len(queue))
			break
		}
		read += len(entries)
		// In order of name, so that a cut falls where it would in a
		// copy of the tree.
		slices.SortFunc(entries, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
		for _, e := range entries {
			path := filepath.Join(d.dir, e.name)
			if isHeld(e.name, held) {
				if d.depth == 0 {
					continue // the ruleset's
				}
				if c := linkChain(path); c.link {
					c.held = true
					w.Links = append(w.Links, c)
				} else {
					w.Names = append(w.Names, path)
				}
				continue
			}
			if e.dir && !slices.Contains(unwalked, e.name) {
				queue = append(queue, level{path, d.depth + 1})
			}
		}
	}
	if len(unlisted) > 0 {
		if w.Cut != "" {
			w.Cut += "; "
		}
		w.Cut += fmt.Sprintf("the walk for held names below the top of %s could not list %s", dir, unlisted[0])
		if len(unlisted) > 1 {
			w.Cut += fmt.Sprintf(" and %d more directories", len(unlisted)-1)
		}
		w.Cut += " (names in them are not held)"
	}
	slices.Sort(w.Names)
	slices.SortFunc(w.Links, func(a, b chain) int { return strings.Compare(a.paths[0], b.paths[0]) })
	return w
}

// A dirent is one entry listDir read: its name, and whether it is a
// directory (not a symbolic link to one).
type dirent struct {
	name string
	dir  bool
}

// listDir returns the entries of the directory at path, relative to the
// directory top and beneath it, reached through no symbolic link (a
// directory replaced by one since its parent was listed is not followed
// out of the working directory: ELOOP; where openat2 is refused, only a
// final link is not followed), in the file system's order, but
// "." and "..", read with buf: the
// fewest system calls a listing takes (os.ReadDir also registers the
// descriptor with the poller and sorts), since a walk lists thousands.
// An entry whose type the file system does not give is asked for it.
func listDir(top int, path string, buf []byte) ([]dirent, error) {
	fd, err := openat2(top, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []dirent
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("list %s: a malformed directory entry", path)
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			e := dirent{name: string(name), dir: typ == unix.DT_DIR}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					e.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
				}
			}
			out = append(out, e)
		}
	}
}
