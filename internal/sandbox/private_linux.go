//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A run's private /tmp and /dev/shm: on the thread that forks the run's
// root, before the Landlock ruleset, a mount namespace of that thread's
// own (unshare(CLONE_NEWNS) unshares only the calling thread's fs_struct,
// so a multi-threaded process may), every mount in it made a slave so
// that nothing propagates back to the host, and a fresh tmpfs on each
// private root. The paths the run is given beneath a root (its working
// directory, its CLI's install and state, its TMPDIR, the files its
// command line and environment name) are cloned from the host before the
// tmpfs covers them and moved back in at their paths, read-only unless
// the run may write them. The namespace, and with it the tmpfs and every
// page in it, ends with the last of its processes: the retired forking
// thread and the run's tree. Its pages are charged to the memory cgroup
// of the process that wrote them: the run's.

// privateRoots are the directories a run gets a tmpfs of its own on.
var privateRoots = []string{"/tmp", "/dev/shm"}

// clonedHook, if not nil, runs once the binds are cloned, before the
// tmpfs covers them: a test changes the host there.
var clonedHook func()

// A bind is a host path given to the run beneath a private root, cloned
// back at its path.
type bind struct {
	Path string `json:"path"`
	RW   bool   `json:"rw,omitempty"`
}

// privatePlan is what the forking thread mounts: binds sorted so that a
// path comes after the paths above it. PrivatePlan hands it to another
// process in JSON.
type privatePlan struct {
	Binds    []bind   `json:"binds"`
	Settings []string `json:"settings,omitempty"` // files bound read-only over themselves
	// Links are the links a settings file leads through and the file they
	// end at, bound read-only over themselves as Settings are; one that
	// cannot be is left as it is (skipped), not fatal.
	Links []string `json:"links,omitempty"`
	// Nested are the held names below the top of the working directory
	// at WorkspaceWrite (walkNested), and the directories a held name's
	// link leads to, bound read-only over themselves, whole; one that
	// cannot be is skipped, as Links are. Walk says where the walk for
	// them stopped short, or is empty; Unheld, why a held name's
	// directory is not held.
	Nested []string `json:"nested,omitempty"`
	Walk   string   `json:"walk,omitempty"`
	Unheld []string `json:"unheld,omitempty"`
	// Masked are the paths covered by an empty file system (mask).
	Masked []string `json:"masked,omitempty"`

	skipped []string // the holds enter could not make, and why (Walk and Unheld too)
	walked  *Walked  // the walk for Nested, which the run's end walks again (Ruleset.Walked)
}

// namedPath matches a path beneath a private root inside a longer text
// (an argument "--mcp-config=/tmp/x/mcp.json", a TOML value): its first
// group, which starts the text or follows a character that cannot be part
// of a longer path ("/var/tmp/x" names no /tmp path). Compiled when the
// host first needs it, not by the package's initialisation, which a first
// stage pays too before it can start.
var namedPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[^\w./~-])((?:/tmp|/dev/shm)(?:/[^\s"',;:=]*)?)`)
})

// planPrivate returns what p's run needs bound into its private roots,
// or nil and why it keeps the host's /tmp and /dev/shm. chains are p's
// settings files followed (followSettings).
func planPrivate(p Policy, chains []chain) (*privatePlan, string) {
	if !p.Private {
		return nil, "not asked"
	}
	// At Unlimited the run may write everything it is given.
	all := p.Level == Unlimited
	hidden, visible := sight(p, false)
	var binds []bind
	add := func(path string, rw bool) {
		if path == "" || !filepath.IsAbs(path) {
			return
		}
		path = filepath.Clean(path)
		paths := []string{path}
		real, err := resolve(path)
		if err == nil && real != path {
			paths = append(paths, real)
		}
		for _, q := range paths {
			if beneathPrivate(q) && !darkAt(q, hidden, visible) {
				// Resolved, path and real are there; else path may
				// still be (a dangling link).
				if err == nil || lexists(q) {
					binds = append(binds, bind{Path: q, RW: rw})
				}
			}
		}
	}
	add(p.Temp, true)
	for _, w := range p.Writable {
		add(w, true)
	}
	for _, v := range p.Visible {
		add(v, all)
	}
	tops := p.Tops
	if p.Level == WorkspaceWrite {
		tops = append(slices.Clip(tops), Top{Dir: p.Workdir, Held: p.Held})
	} else {
		add(p.Workdir, all)
	}
	for _, t := range tops {
		// The top read-only, its existing entries but the held names
		// writable: what the ruleset holds outside the private roots
		// (Top), held here by mounts, since the tmpfs's own rule reaches
		// everything beneath it.
		if !beneathPrivate(filepath.Clean(t.Dir)) {
			continue
		}
		add(t.Dir, false)
		entries, _ := os.ReadDir(t.Dir)
		for _, e := range entries {
			if !isHeld(e.Name(), t.Held) && e.Type()&os.ModeSymlink == 0 {
				add(filepath.Join(t.Dir, e.Name()), true)
			}
		}
	}
	// A path the command line or the environment names is bound
	// read-only, unless what is bound above gives it already.
	given := len(binds)
	for _, text := range p.Named {
		if !namesPrivate(text) {
			continue // most of the environment: no match to look for
		}
		for _, sm := range namedPath().FindAllStringSubmatch(text, -1) {
			m := sm[1]
			if !slices.ContainsFunc(binds[:given], func(b bind) bool { return under(filepath.Clean(m), b.Path) }) {
				add(m, all)
			}
		}
	}
	slices.SortStableFunc(binds, func(a, b bind) int { return strings.Compare(a.Path, b.Path) })
	// One bind per path, writable if any asks so.
	var out []bind
	for _, b := range binds {
		if n := len(out); n > 0 && out[n-1].Path == b.Path {
			out[n-1].RW = out[n-1].RW || b.RW
			continue
		}
		out = append(out, b)
	}
	binds = out
	for _, b := range binds {
		for _, h := range hidden {
			if h != b.Path && under(h, b.Path) {
				// The tmpfs's rule would make it readable through the bind.
				return nil, fmt.Sprintf("the hidden path %s lies beneath %s, which the run is given beneath a private root", h, b.Path)
			}
		}
	}
	pl := &privatePlan{Binds: binds, Masked: p.Masked}
	if all {
		return pl, "" // no ceiling on writes: the settings too
	}
	seen := func(q string) bool {
		// Beneath a private root, only what is bound there is the run's
		// to see.
		return !beneathPrivate(q) || slices.ContainsFunc(binds, func(b bind) bool { return under(q, b.Path) })
	}
	if p.Level == WorkspaceWrite {
		w := walkNested(p.Workdir, p.Held, nestedBudget)
		pl.Walk = w.Cut
		pl.walked = &Walked{dir: p.Workdir, held: p.Held, found: w.Found, marked: w.Marked}
		for _, q := range w.Names {
			if seen(q) {
				pl.Nested = append(pl.Nested, q)
			}
		}
		chains = append(slices.Clip(chains), w.Links...)
	}
	for _, c := range chains {
		for i, q := range c.paths {
			if !seen(q) {
				continue // not the run's to see
			}
			fi, err := os.Lstat(q)
			if err == nil && fi.IsDir() && c.held && i > 0 && !slices.Contains(pl.Nested, q) {
				// A held name that is a link to a directory (a nested
				// repository's .git kept elsewhere): the directory is
				// held whole, as a held name that is one; but not one
				// the working directory lies in, which would hold the
				// run's whole tree.
				if under(p.Workdir, q) {
					pl.Unheld = append(pl.Unheld, fmt.Sprintf("%s is a symbolic link to %s, which holds the working directory: not held read-only", c.paths[0], q))
				} else {
					pl.Nested = append(pl.Nested, q)
				}
				continue
			}
			if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0) || slices.Contains(pl.Settings, q) || slices.Contains(pl.Links, q) {
				continue
			}
			// A held name's chain, the link first, is held as a
			// settings file's links are: one that cannot be held costs
			// its own hold (the ruleset refuses the link itself anyway).
			if i == 0 && !c.held {
				pl.Settings = append(pl.Settings, q)
			} else {
				pl.Links = append(pl.Links, q)
			}
		}
	}
	return pl, ""
}

// lexists reports whether there is a file at path, a symbolic link not
// followed.
func lexists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// namesPrivate reports whether text holds a private root's path at all,
// which namedPath needs to match: a test of each root's bytes, cheaper
// than the expression over most of a run's environment.
func namesPrivate(text string) bool {
	return slices.ContainsFunc(privateRoots, func(r string) bool { return strings.Contains(text, r) })
}

// resolve returns filepath.EvalSymlinks(path) for path absolute and
// clean: where no element of path is a symbolic link, path itself, found
// by one openat2 (RESOLVE_NO_SYMLINKS) rather than an lstat of each
// element; else (a link on the way, or openat2 refused) what
// EvalSymlinks returns.
func resolve(path string) (string, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err == nil {
		unix.Close(fd)
		return path, nil
	}
	return filepath.EvalSymlinks(path)
}

// maxLinks is how many symbolic links linkChain follows, as the kernel
// does before ELOOP.
const maxLinks = 40

// A chain is a settings file followed (linkChain): the file, each
// symbolic link it leads through when it is one and the path they end
// at.
type chain struct {
	paths []string
	link  bool // the file is a symbolic link
	held  bool // a held name of the working directory (followHeld)
}

// followSettings follows each of settings (cleaned) once, for both the
// private roots' plan and the links into hidden paths (hiddenLinks).
func followSettings(settings []string) []chain {
	var out []chain
	for _, f := range clean(settings) {
		out = append(out, linkChain(f))
	}
	return out
}

// followHeld follows, at WorkspaceWrite, each of p's held names at the
// top of the working directory that is a symbolic link (.env ->
// .env.local, .mcp.json -> tools/mcp.json): the ruleset gives the link no
// right, but the file it ends at keeps its own (a writable entry of the
// working directory), so the private roots' mount namespace holds the
// chain read-only as it holds a settings file's. A name that is no link
// costs one Lstat.
func followHeld(p Policy) []chain {
	if p.Level != WorkspaceWrite || p.Workdir == "" {
		return nil
	}
	var out []chain
	for _, n := range p.Held {
		if c := linkChain(filepath.Join(filepath.Clean(p.Workdir), n)); c.link {
			c.held = true
			out = append(out, c)
		}
	}
	return out
}

// linkChain returns path, each symbolic link it leads through when it is
// one (the link, the links it names in turn) and the path they end at:
// what holding a settings file that a dotfiles manager links elsewhere
// takes. A link's relative target is read from the directory the link is
// really in. It stops before a target in /proc, /sys or /dev (a link
// through /proc/<pid>/root leads anywhere, and none of them is a file to
// hold).
func linkChain(path string) chain {
	var c chain
	for i := range maxLinks {
		c.paths = append(c.paths, path)
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return c
		}
		c.link = c.link || i == 0
		target, err := os.Readlink(path)
		if err != nil {
			return c
		}
		if !filepath.IsAbs(target) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return c
			}
			target = filepath.Join(dir, target)
		}
		path = filepath.Clean(target)
		if slices.ContainsFunc(kernelTrees, func(k string) bool { return under(path, k) }) {
			return c
		}
	}
	return c
}

// kernelTrees are the trees linkChain never follows a link into.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// hiddenLinks returns the files of p.Settings (followed as chains) that
// are symbolic links to a file the run cannot read: one at or beneath a
// Hidden path with no Visible (nor writable, nor working) path between,
// its path resolved. Where no settings file is a link, as on most hosts,
// it costs nothing beyond the following: the hidden and visible paths are
// resolved only once one is.
func hiddenLinks(p Policy, chains []chain) []Link {
	var hidden, visible []string
	lit := false // hidden and visible resolved
	var out []Link
	for _, c := range chains {
		if !c.link {
			continue
		}
		// Where the links end, its directories resolved; dangling, or a
		// loop: the last link followed.
		end := c.paths[len(c.paths)-1]
		target, err := filepath.EvalSymlinks(end)
		if err != nil {
			target = end
		}
		if !lit {
			hidden, visible = sight(p, true)
			lit = true
		}
		if darkAt(target, hidden, visible) {
			out = append(out, Link{Path: c.paths[0], Target: target})
		}
	}
	return out
}

// HiddenLinks returns the files of the policy's Settings that are
// symbolic links to a file the run cannot read: one at or beneath a
// Hidden path with no Visible (nor writable, nor working) path between,
// its path resolved. The CLI cannot read such a file as its own; a
// dotfiles manager's link needs the target's directory in Visible, and a
// link that an earlier run made to another tool's file (its keys) reads
// nothing. Build follows each settings file once, for these and for the
// private roots.
func (r *Ruleset) HiddenLinks() []Link {
	if r == nil {
		return nil
	}
	return r.links
}

// sight returns the hidden paths of p and the visible ones beneath them
// (the working, temporary, writable and top directories and Visible),
// cleaned, each hidden path followed by the path it resolves to where
// that differs: the rules hold the file, not the name, and a hidden path
// reached through a link must be dark by its real path too. The visible
// paths are resolved as well where all is set or a hidden path resolves
// elsewhere (a visible path beneath it must light its real path); else
// their names serve, as a rule's path is followed when it is added.
func sight(p Policy, all bool) (hidden, visible []string) {
	hidden = resolved(p.Hidden)
	visible = slices.Concat([]string{p.Workdir, p.Temp}, p.Visible, p.Writable)
	for _, t := range p.Tops {
		visible = append(visible, t.Dir)
	}
	if all || len(hidden) > len(clean(p.Hidden)) {
		return hidden, resolved(visible)
	}
	return hidden, clean(visible)
}

// resolved returns paths, cleaned, each followed by the path it resolves
// to where that differs (the rules hold the file, not the name).
func resolved(paths []string) []string {
	var out []string
	for _, p := range clean(paths) {
		out = append(out, p)
		if real, err := resolve(p); err == nil && real != p {
			out = append(out, real)
		}
	}
	return out
}

// beneathPrivate reports whether p is beneath one of the private roots.
func beneathPrivate(p string) bool {
	for _, r := range privateRoots {
		if p != r && under(p, r) {
			return true
		}
	}
	return false
}

// enter gives the calling thread, locked and about to fork the run's root,
// its private roots, and adds to b the rule that lets the run use them. It
// returns an error, with the thread's view of the filesystem the host's
// again, when a step fails (no CAP_SYS_ADMIN: EPERM).
//
// What changed in the host since the plan costs only its own bind: a path
// gone (ENOENT, ENOTDIR) is left out, and so is one that could be moved
// back only by making something outside the private roots' own tmpfs (in
// a tree bound from the host) or through a symbolic link. A path that is
// a symbolic link is made again as one in the tmpfs, its target bound
// where the run is given it.
func (pl *privatePlan) enter(b *builder) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// First, so that nothing below reaches the host's mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave: %w", err)
	}
	// Each bind's clone (fd > 0), or the target of the link it is (link
	// set), or neither: gone from the host.
	type source struct {
		fd   int
		dir  bool
		link string
	}
	srcs := make([]source, len(pl.Binds))
	defer func() {
		for _, s := range srcs {
			if s.fd > 0 {
				unix.Close(s.fd)
			}
		}
	}()
	for i, bd := range pl.Binds {
		var err error
		if srcs[i].link, err = os.Readlink(bd.Path); err == nil {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, bd.Path, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
		if gone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("clone %s: %w", bd.Path, err)
		}
		srcs[i].fd = fd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat the clone of %s: %w", bd.Path, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// Made a link since Readlink: left out.
			unix.Close(fd)
			srcs[i].fd = 0
			continue
		}
		srcs[i].dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		if !bd.RW {
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("make the clone of %s read-only: %w", bd.Path, err)
			}
		}
	}
	// The shells too, before the tmpfs covers what they are bound to.
	// Shells that cannot be bound cost the nesting of the CLI's
	// commands, not the private roots and the holds.
	shells, err := cloneShells()
	if err != nil {
		pl.skipped = append(pl.skipped, unnested(err))
	}
	defer shells.close()
	if clonedHook != nil {
		clonedHook()
	}
	var mounted []string
	undo := func(err error) error {
		for _, m := range slices.Backward(mounted) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
		return err
	}
	var tmpfs []uint64 // the mount IDs of the private roots' tmpfs
	for _, root := range privateRoots {
		if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
			continue // a host without it, or a link: left as it is
		}
		if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return undo(fmt.Errorf("mount a tmpfs on %s: %w", root, err))
		}
		mounted = append(mounted, root)
		id, err := mountID(root)
		if err != nil {
			return undo(err)
		}
		tmpfs = append(tmpfs, id)
	}
	for i, bd := range pl.Binds {
		s := srcs[i]
		if s.fd <= 0 && s.link == "" {
			continue // gone
		}
		ok, err := mountPoint(bd.Path, s.dir, s.link, tmpfs)
		if err != nil {
			return undo(err)
		}
		if !ok || s.link != "" {
			continue
		}
		if err := unix.MoveMount(s.fd, "", unix.AT_FDCWD, bd.Path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil && !gone(err) {
			return undo(fmt.Errorf("bind %s back: %w", bd.Path, err))
		}
		unix.Close(s.fd)
		srcs[i].fd = 0
	}
	roots := len(mounted)
	for _, f := range pl.Settings {
		held, err := holdFile(f)
		if err != nil {
			return undo(err)
		}
		if held {
			mounted = append(mounted, f)
		}
	}
	// A link on the way, the file it ends at, or a held name below the
	// top, that cannot be held (on a mount that cannot be cloned) costs
	// its own hold, not the private roots and every other hold.
	holdEach := func(paths []string, hold func(string) (bool, error)) {
		for _, f := range paths {
			held, err := hold(f)
			if err != nil {
				pl.skipped = append(pl.skipped, err.Error())
			}
			if held {
				mounted = append(mounted, f)
			}
		}
	}
	holdEach(pl.Links, holdFile)
	holdEach(pl.Nested, holdTree)
	var mk masker
	defer mk.close()
	for _, m := range pl.Masked {
		// A secret the run could read, unlike a hold, is not skipped.
		covered, err := mk.mask(m)
		if err != nil {
			return undo(err)
		}
		if covered {
			mounted = append(mounted, m)
		}
	}
	if pl.Walk != "" {
		pl.skipped = append(pl.skipped, pl.Walk)
	}
	pl.skipped = append(pl.skipped, pl.Unheld...)
	if slices.Contains(mounted[:roots], "/tmp") {
		n := len(mounted)
		if err := shells.mount(&mounted); err != nil {
			for _, m := range slices.Backward(mounted[n:]) {
				unix.Unmount(m, unix.MNT_DETACH)
			}
			mounted = mounted[:n]
			pl.skipped = append(pl.skipped, unnested(err))
		}
	}
	for _, root := range mounted[:roots] {
		if err := b.add(root, b.rt.all, false); err != nil {
			return undo(err)
		}
	}
	return nil
}

// gone reports whether err says that a path is no longer there.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// mountID returns the ID of the mount path is on (not following a final
// symbolic link).
func mountID(path string) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx %s: %w", path, err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: the kernel gave no mount ID (Linux 5.8 or later)", path)
	}
	return stx.Mnt_id, nil
}

// holdFile binds the file at path read-only over itself: it can then be
// neither written, nor truncated (EROFS), nor removed, nor renamed, nor
// replaced by a rename (EBUSY: a mount point). A symbolic link is bound
// over itself, not followed (a link can be a mount point): it still leads
// where it did, and can be neither removed nor replaced; its target is
// held apart (linkChain). It returns false, and no error, where the file
// is gone.
func holdFile(path string) (bool, error) { return hold(path, 0) }

// holdTree binds the file or directory at path read-only over itself, as
// holdFile does, with every mount beneath it: a directory is held whole.
// It returns false, and no error, where path is gone.
func holdTree(path string) (bool, error) { return hold(path, unix.AT_RECURSIVE) }

// hold binds path read-only over itself, with the mounts beneath it where
// flags has AT_RECURSIVE. The path is looked up once (a final symbolic
// link not followed), and the clone of what it found is mounted on that
// same file: a directory above it renamed or replaced by a link between
// two look-ups cannot have a file from elsewhere mounted at the path,
// where the run would reach it through the path's rules. Wherever the
// path leads, a file is bound over itself, which shows nothing new.
func hold(path string, flags uint) (bool, error) {
	at, err := openat2(unix.AT_FDCWD, path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, unix.RESOLVE_NO_MAGICLINKS)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(at)
	fd, err := unix.OpenTree(at, "", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_EMPTY_PATH|flags)
	if err != nil {
		return false, fmt.Errorf("clone %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|flags&unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return false, fmt.Errorf("make the clone of %s read-only: %w", path, err)
	}
	err = unix.MoveMount(fd, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hold %s read-only: %w", path, err)
	}
	return true, nil
}

// openat2 opens path relative to dirfd with flags, resolved within
// resolve (RESOLVE_* flags). Where the system call is refused as unknown
// (a container's seccomp profile older than it: ENOSYS, or EPERM) it
// opens path with flags alone, one look-up still, without resolve's
// limits but O_NOFOLLOW's.
// sysOpenat2 is the system call openat2 makes first (a test refuses it).
var sysOpenat2 = unix.Openat2

func openat2(dirfd int, path string, flags int, resolve uint64) (int, error) {
	fd, err := sysOpenat2(dirfd, path, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return unix.Openat(dirfd, path, flags, 0)
	}
	return fd, err
}

// mountPoint makes path, in a private root, a place to move a clone onto
// (a directory where dir, else an empty file), or, where link is not
// empty, a symbolic link to link. It makes what is missing only in the
// private roots' own tmpfs (their mount IDs): it returns false, having
// made nothing, where path or a directory above it is missing in a tree
// bound from the host (or outside the roots), is a symbolic link, or is
// not of the clone's kind. An existing link is left as it is (true).
func mountPoint(path string, dir bool, link string, tmpfs []uint64) (bool, error) {
	p := "/"
	for _, name := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		parent := p
		p = filepath.Join(p, name)
		last := p == path
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0:
			return last && link != "", nil
		case err == nil && last:
			return link == "" && fi.IsDir() == dir, nil
		case err == nil && !fi.IsDir():
			return false, nil
		case err == nil:
			continue
		case !errors.Is(err, os.ErrNotExist):
			return false, fmt.Errorf("a mount point for %s: %w", path, err)
		}
		if id, err := mountID(parent); err != nil || !slices.Contains(tmpfs, id) {
			return false, nil // it would be made in the host's tree
		}
		switch {
		case !last || (dir && link == ""):
			err = os.Mkdir(p, 0o755)
		case link != "":
			err = os.Symlink(link, p)
		default:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return false, fmt.Errorf("a mount point for %s: %w", path, err)
		}
	}
	return true, nil
}

// ProbePrivate reports whether this process can give a run private /tmp
// and /dev/shm: nil if so (it may make a mount namespace), else why not.
// It tries once, on a thread of its own which ends with the try
// (Retired); later calls return the first answer.
func ProbePrivate() error { return privateProbe() }

// privateProbe is ProbePrivate's answer, asked once.
var privateProbe = sync.OnceValue(func() error {
	if err := Retired(func() error { return unix.Unshare(unix.CLONE_NEWNS) }); err != nil {
		return fmt.Errorf("a mount namespace for the run's private /tmp and /dev/shm needs CAP_SYS_ADMIN: unshare(CLONE_NEWNS): %w", err)
	}
	return nil
})

// PrivatePlan returns r's private /tmp and /dev/shm as a process that
// applies r itself (File) gives them to itself with EnterPrivate, or nil
// where r has none. Where this process cannot make them (ProbePrivate),
// Build leaves them unplanned and the first call plans them.
func (r *Ruleset) PrivatePlan() []byte {
	if r != nil && r.later != nil {
		r.private, r.noPriv = planPrivate(*r.later, r.chains)
		r.later, r.chains = nil, nil
	}
	if r == nil || r.private == nil {
		return nil
	}
	out, _ := json.Marshal(r.private)
	return out
}

// EnterPrivate gives the calling thread (locked, about to execute the
// run's program, in a mount namespace of its own and with CAP_SYS_ADMIN
// there) the private /tmp and /dev/shm of plan (PrivatePlan), adding to
// the ruleset open at fd the rule that lets the run use them; apply the
// ruleset afterwards. It returns the links on the way to a settings file
// (and the files they end at) that it left as they are, each with why
// (Ruleset.Unheld). On error the thread's view of the filesystem is the
// one it had.
func EnterPrivate(plan []byte, fd int) ([]string, error) {
	var pl privatePlan
	if err := json.Unmarshal(plan, &pl); err != nil {
		return nil, fmt.Errorf("sandbox: the private roots' plan: %w", err)
	}
	abi, err := Probe()
	if err != nil {
		return nil, err
	}
	if err := pl.enter(&builder{fd: fd, rt: rightsFor(abi)}); err != nil {
		return nil, err
	}
	return pl.skipped, nil
}
