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

// A directory below the top that holds one of these files is made by a
// tool, not a user: the walk lists it (its own held names are held) but
// enters none of its subdirectories. pyvenv.cfg marks a Python virtual
// environment (PEP 405: venv, virtualenv, uv, tox and nox make one, with
// thousands of files in its site-packages); a CACHEDIR.TAG that begins
// with cacheDirSignature marks a cache by the Cache Directory Tagging
// Specification (Cargo's target, pytest's and mypy's caches, among
// others). The top's own marker is not followed: `python -m venv .` in a
// project makes the project no tool's.
const (
	venvMarker        = "pyvenv.cfg"
	cacheDirTag       = "CACHEDIR.TAG"
	cacheDirSignature = "Signature: 8a477f597d28d172789f06886806bc55"
)

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
	// Found are the held names found, Names' and Links' alike, each with
	// its inode number as its directory's listing gave it: what a walk
	// at the run's end compares with (heldSince).
	Found map[string]uint64
	// Marked are the directories whose subdirectories it did not enter,
	// marked by a tool (venvMarker, cacheDirTag).
	Marked []string
}

// walkNested walks the working directory dir, breadth first, for the
// entries named one of held below its top (the top's own are held by the
// ruleset), within budget. It enters neither a held name (held whole),
// nor a symbolic link, nor a directory of unwalked, nor the subdirectories
// of a directory below the top that a tool marked as its own (venvMarker,
// cacheDirTag), nor another mount (a bind, a network file system: one
// that hangs would hang the run's start), nor a directory it cannot list;
// an entry beyond the budget is not read, and Cut says where the walk
// stopped, which mounts it did not enter, and what it could not list. A
// dir that is reached through a symbolic link is walked at its real
// path, which the names found are under. It reads the filesystem only:
// the same tree gives the same walk.
func walkNested(dir string, held []string, budget walkBudget) nestedWalk {
	return walkMarked(dir, held, budget, nil)
}

// walkMarked is walkNested honouring a tool's mark only on a directory of
// only where only is not nil (the marks a walk at the run's start found:
// one the run planted since does not hide what it made beneath).
func walkMarked(dir string, held []string, budget walkBudget, only []string) nestedWalk {
	var w nestedWalk
	if dir == "" || len(held) == 0 {
		return w
	}
	dir = filepath.Clean(dir)
	if real, err := resolve(dir); err == nil {
		dir = real // the lister follows no link
	}
	type level struct {
		dir   string
		depth int
	}
	l, err := newLister(dir)
	if err != nil {
		return w
	}
	defer l.close()
	queue := []level{{dir, 0}}
	read := 0
	var unlisted, mounts []string
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
		entries, marked, err := l.list(rel, d.depth > 0)
		if errors.Is(err, unix.ENOENT) {
			continue // gone
		}
		if errors.Is(err, unix.EXDEV) {
			mounts = append(mounts, d.dir)
			continue
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
		if marked && only != nil && !slices.Contains(only, d.dir) {
			marked = false
		}
		if marked {
			w.Marked = append(w.Marked, d.dir)
		}
		// In order of name, so that a cut falls where it would in a
		// copy of the tree.
		slices.SortFunc(entries, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
		for _, e := range entries {
			path := filepath.Join(d.dir, e.name)
			if isHeld(e.name, held) {
				if d.depth == 0 {
					continue // the ruleset's
				}
				if w.Found == nil {
					w.Found = map[string]uint64{}
				}
				w.Found[path] = e.ino
				if c := linkChain(path); c.link {
					c.held = true
					w.Links = append(w.Links, c)
				} else {
					w.Names = append(w.Names, path)
				}
				continue
			}
			if e.dir && !marked && !slices.Contains(unwalked, e.name) {
				queue = append(queue, level{path, d.depth + 1})
			}
		}
	}
	for _, m := range []struct {
		dirs []string
		what string
	}{{mounts, "did not enter %s, another mount"}, {unlisted, "could not list %s"}} {
		if len(m.dirs) == 0 {
			continue
		}
		if w.Cut != "" {
			w.Cut += "; "
		}
		w.Cut += fmt.Sprintf("the walk for held names below the top of %s "+m.what, dir, m.dirs[0])
		if len(m.dirs) > 1 {
			w.Cut += fmt.Sprintf(" and %d more directories", len(m.dirs)-1)
		}
		w.Cut += " (names in them are not held)"
	}
	slices.Sort(w.Names)
	slices.SortFunc(w.Links, func(a, b chain) int { return strings.Compare(a.paths[0], b.paths[0]) })
	return w
}

// A dirent is one entry a lister read: its name, its inode number, and
// whether it is a directory or a regular file (not a symbolic link to
// one).
type dirent struct {
	name string
	ino  uint64
	dir  bool
	reg  bool
}

// A lister lists the directories beneath the top of a working directory
// for walkNested, with one buffer.
type lister struct {
	top int          // the top, O_PATH
	at  unix.Statx_t // the top's mount (Mnt_id, or the device where the kernel gives none), once sameMount needs it
	buf [32 << 10]byte
}

// newLister opens dir, the top of a walk.
func newLister(dir string) (*lister, error) {
	top, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &lister{top: top}, nil
}

func (l *lister) close() { unix.Close(l.top) }

// list returns the entries of the directory at path, relative to the
// top and beneath it, and, where marks is set, whether a tool marked it
// as its own (venvMarker, cacheDirTag). It lists only a directory on the
// top's own mount (another: EXDEV, the mount not entered: neither an
// automount triggered nor a file system's server asked), reached through
// no symbolic link (a directory replaced by one since its parent was
// listed is not followed out of the working directory: ELOOP). Where
// openat2 is refused, the mount is compared before the open (statx,
// asking no server: AT_STATX_DONT_SYNC), and only a final link is not
// followed. The entries are in the file system's order, but "." and "..":
// getdents into one buffer, the fewest system calls a listing takes
// (os.ReadDir also registers the descriptor with the poller and sorts),
// since a walk lists thousands. An entry whose type the file system does
// not give is asked for it.
func (l *lister) list(path string, marks bool) ([]dirent, bool, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := sysOpenat2(l.top, path, &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		if err := l.sameMount(path); err != nil {
			return nil, false, err
		}
		fd, err = unix.Openat(l.top, path, flags, 0)
	}
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	var out []dirent
	buf := l.buf[:]
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, false, err
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, false, fmt.Errorf("list %s: a malformed directory entry", path)
			}
			ino := binary.NativeEndian.Uint64(b[0:8])
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			e := dirent{name: string(name), ino: ino, dir: typ == unix.DT_DIR, reg: typ == unix.DT_REG}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					e.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
					e.reg = st.Mode&unix.S_IFMT == unix.S_IFREG
				}
			}
			out = append(out, e)
		}
	}
	return out, marks && toolMarked(fd, out), nil
}

// sameMount returns EXDEV where the directory at path, relative to the
// top, is not on the top's mount (by mount ID; by device where the kernel
// gives none, before Linux 5.8), asking the file system no server
// (AT_STATX_DONT_SYNC) and triggering no automount; or why it cannot tell.
func (l *lister) sameMount(path string) error {
	if l.at.Mask == 0 {
		if err := unix.Statx(l.top, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &l.at); err != nil {
			return err
		}
	}
	var st unix.Statx_t
	if err := unix.Statx(l.top, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st); err != nil {
		return err
	}
	if st.Mask&l.at.Mask&unix.STATX_MNT_ID != 0 {
		if st.Mnt_id != l.at.Mnt_id {
			return unix.EXDEV
		}
		return nil
	}
	if st.Dev_major != l.at.Dev_major || st.Dev_minor != l.at.Dev_minor {
		return unix.EXDEV
	}
	return nil
}

// toolMarked reports whether the directory open at fd, whose entries
// are entries, holds a regular venvMarker, or a regular cacheDirTag that
// begins with cacheDirSignature: one open and read of the tag, only where
// it is there.
func toolMarked(fd int, entries []dirent) bool {
	tagged := false
	for _, e := range entries {
		switch {
		case !e.reg:
		case e.name == venvMarker:
			return true
		case e.name == cacheDirTag:
			tagged = true
		}
	}
	if !tagged {
		return false
	}
	// O_NONBLOCK: a FIFO swapped in since the listing does not stall the
	// walk; it is no regular file, and fails the read.
	f, err := unix.Openat(fd, cacheDirTag, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(f)
	var st unix.Stat_t
	if unix.Fstat(f, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	var sig [len(cacheDirSignature)]byte
	n, err := unix.Pread(f, sig[:], 0)
	return err == nil && n == len(sig) && string(sig[:]) == cacheDirSignature
}

// A Walked is the walk for held names below the top of a run's working
// directory that its plan made at its start (WorkspaceWrite, with the
// private roots): what a walk once the run's tree is gone compares with.
type Walked struct {
	dir    string
	held   []string
	found  map[string]uint64 // inode numbers, as nestedWalk.Found
	marked []string          // as nestedWalk.Marked: the marks the walk again honours
}

// Walked returns the walk the plan of the run's private roots made for
// the held names below the top of its working directory, or nil where it
// made none (below WorkspaceWrite, at Unlimited, without private roots);
// call it once the plan is made (Build, or PrivatePlan where a first
// stage makes the roots).
func (r *Ruleset) Walked() *Walked {
	if r == nil || r.private == nil {
		return nil
	}
	return r.private.walked
}

// Since walks the working directory again, with the walk's rules and
// budget, and returns, sorted, the held names below its top that exist
// now and that the walk at the run's start did not find (made since: the
// mounts that hold names bind only what exists, so none of these was
// held), and those it found that are another file now (replaced: a
// directory above one renamed away and another made at its name). A name
// found at another path, the same file (the directory above it renamed,
// the hold with it), is neither; the walk enters no other mount, so an
// inode number names one file.
func (w *Walked) Since() (made, replaced []string) {
	if w == nil {
		return nil, nil
	}
	only := w.marked
	if only == nil {
		only = []string{} // no mark then: none now
	}
	now := walkMarked(w.dir, w.held, nestedBudget, only)
	var moved map[uint64]bool
	for path, ino := range now.Found {
		was, ok := w.found[path]
		if !ok && moved == nil {
			moved = map[uint64]bool{}
			for _, i := range w.found {
				moved[i] = true
			}
		}
		switch {
		case !ok && moved[ino]:
		case !ok:
			made = append(made, path)
		case was != ino:
			replaced = append(replaced, path)
		}
	}
	slices.Sort(made)
	slices.Sort(replaced)
	return made, replaced
}
