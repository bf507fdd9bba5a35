//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

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

// A bind is a host path given to the run beneath a private root, cloned
// back at its path.
type bind struct {
	path string
	rw   bool
}

// privatePlan is what the forking thread mounts: binds sorted so that a
// path comes after the paths above it.
type privatePlan struct {
	binds    []bind
	settings []string // files bound read-only over themselves
}

// namedPath matches a path beneath a private root inside a longer text
// (an argument "--mcp-config=/tmp/x/mcp.json", a TOML value): its first
// group, which starts the text or follows a character that cannot be part
// of a longer path ("/var/tmp/x" names no /tmp path).
var namedPath = regexp.MustCompile(`(?:^|[^\w./~-])((?:/tmp|/dev/shm)(?:/[^\s"',;:=]*)?)`)

// planPrivate returns what p's run needs bound into its private roots,
// or nil and why it keeps the host's /tmp and /dev/shm.
func planPrivate(p Policy) (*privatePlan, string) {
	if !p.Private {
		return nil, "not asked"
	}
	// At Unlimited the run may write everything it is given.
	all := p.Level == Unlimited
	hidden, visible := clean(p.Hidden), clean(append([]string{p.Workdir, p.Temp}, append(p.Visible, p.Writable...)...))
	for _, t := range p.Tops {
		visible = append(visible, clean([]string{t.Dir})...)
	}
	var binds []bind
	add := func(path string, rw bool) {
		if path == "" || !filepath.IsAbs(path) {
			return
		}
		path = filepath.Clean(path)
		paths := []string{path}
		if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
			paths = append(paths, real)
		}
		for _, q := range paths {
			if beneathPrivate(q) && !darkAt(q, hidden, visible) {
				if _, err := os.Lstat(q); err == nil {
					binds = append(binds, bind{path: q, rw: rw})
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
		for _, sm := range namedPath.FindAllStringSubmatch(text, -1) {
			m := sm[1]
			if !slices.ContainsFunc(binds[:given], func(b bind) bool { return under(filepath.Clean(m), b.path) }) {
				add(m, all)
			}
		}
	}
	slices.SortStableFunc(binds, func(a, b bind) int { return strings.Compare(a.path, b.path) })
	// One bind per path, writable if any asks so.
	var out []bind
	for _, b := range binds {
		if n := len(out); n > 0 && out[n-1].path == b.path {
			out[n-1].rw = out[n-1].rw || b.rw
			continue
		}
		out = append(out, b)
	}
	binds = out
	for _, b := range binds {
		for _, h := range hidden {
			if h != b.path && under(h, b.path) {
				// The tmpfs's rule would make it readable through the bind.
				return nil, fmt.Sprintf("the hidden path %s lies beneath %s, which the run is given beneath a private root", h, b.path)
			}
		}
	}
	pl := &privatePlan{binds: binds}
	if all {
		return pl, "" // no ceiling on writes: the settings too
	}
	for _, f := range clean(p.Settings) {
		if beneathPrivate(f) && !slices.ContainsFunc(binds, func(b bind) bool { return under(f, b.path) }) {
			continue // not the run's to see
		}
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
			pl.settings = append(pl.settings, f)
		}
	}
	return pl, ""
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
func (pl *privatePlan) enter(b *builder) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// First, so that nothing below reaches the host's mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave: %w", err)
	}
	clones := make([]int, len(pl.binds))
	defer func() {
		for _, fd := range clones {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, bd := range pl.binds {
		fd, err := unix.OpenTree(unix.AT_FDCWD, bd.path, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("clone %s: %w", bd.path, err)
		}
		clones[i] = fd
		if !bd.rw {
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("make the clone of %s read-only: %w", bd.path, err)
			}
		}
	}
	var mounted []string
	undo := func(err error) error {
		for _, m := range slices.Backward(mounted) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
		return err
	}
	for _, root := range privateRoots {
		if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
			continue // a host without it, or a link: left as it is
		}
		if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return undo(fmt.Errorf("mount a tmpfs on %s: %w", root, err))
		}
		mounted = append(mounted, root)
	}
	for i, bd := range pl.binds {
		if err := mountPoint(clones[i], bd.path); err != nil {
			return undo(err)
		}
		if err := unix.MoveMount(clones[i], "", unix.AT_FDCWD, bd.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return undo(fmt.Errorf("bind %s back: %w", bd.path, err))
		}
		unix.Close(clones[i])
		clones[i] = 0
	}
	for _, f := range pl.settings {
		if err := holdFile(f); err != nil {
			return undo(err)
		}
		mounted = append(mounted, f)
	}
	for _, root := range mounted[:len(mounted)-len(pl.settings)] {
		if err := b.add(root, b.rt.all, false); err != nil {
			return undo(err)
		}
	}
	return nil
}

// holdFile binds the file at path read-only over itself: it can then be
// neither written, nor truncated (EROFS), nor removed, nor renamed, nor
// replaced by a rename (EBUSY: a mount point).
func holdFile(path string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the clone of %s read-only: %w", path, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("hold %s read-only: %w", path, err)
	}
	return nil
}

// mountPoint makes path, in a private root, a place to move the clone
// open at fd onto: a directory or an empty file, as the clone is.
func mountPoint(fd int, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return nil // in the host's tree bound above it
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat the clone of %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("a mount point for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.Mkdir(path, 0o755); err != nil {
			return fmt.Errorf("a mount point for %s: %w", path, err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("a mount point for %s: %w", path, err)
	}
	return f.Close()
}

// ProbePrivate reports whether this process can give a run private /tmp
// and /dev/shm: nil if so (it may make a mount namespace), else why not.
// It tries on a thread of its own, which ends with the try.
func ProbePrivate() error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, and its
		// namespace with it.
		runtime.LockOSThread()
		done <- unix.Unshare(unix.CLONE_NEWNS)
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("a mount namespace for the run's private /tmp and /dev/shm needs CAP_SYS_ADMIN: unshare(CLONE_NEWNS): %w", err)
	}
	return nil
}

// wirePlan is a privatePlan as PrivatePlan hands it to another process.
type wirePlan struct {
	Binds    []wireBind `json:"binds"`
	Settings []string   `json:"settings,omitempty"`
}

type wireBind struct {
	Path string `json:"path"`
	RW   bool   `json:"rw,omitempty"`
}

// PrivatePlan returns r's private /tmp and /dev/shm as a process that
// applies r itself (File) gives them to itself with EnterPrivate, or nil
// where r has none.
func (r *Ruleset) PrivatePlan() []byte {
	if r == nil || r.private == nil {
		return nil
	}
	w := wirePlan{Settings: r.private.settings}
	for _, b := range r.private.binds {
		w.Binds = append(w.Binds, wireBind{Path: b.path, RW: b.rw})
	}
	out, _ := json.Marshal(w)
	return out
}

// EnterPrivate gives the calling thread (locked, about to execute the
// run's program, in a mount namespace of its own and with CAP_SYS_ADMIN
// there) the private /tmp and /dev/shm of plan (PrivatePlan), adding to
// the ruleset open at fd the rule that lets the run use them; apply the
// ruleset afterwards. On error the thread's view of the filesystem is the
// one it had.
func EnterPrivate(plan []byte, fd int) error {
	var w wirePlan
	if err := json.Unmarshal(plan, &w); err != nil {
		return fmt.Errorf("sandbox: the private roots' plan: %w", err)
	}
	abi, err := Probe()
	if err != nil {
		return err
	}
	pl := &privatePlan{settings: w.Settings}
	for _, b := range w.Binds {
		pl.binds = append(pl.binds, bind{path: b.Path, rw: b.RW})
	}
	return pl.enter(&builder{fd: fd, rt: rightsFor(abi)})
}
